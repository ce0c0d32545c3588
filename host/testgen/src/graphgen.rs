//! Random valid graphs over every operator, for differential testing (native against wasm) and
//! fuzzing.
//!
//! The generator is driven by bytes ([`ByteSource`]): a fuzzer steers it through its input, a
//! test through a seeded stream. It knows operators only through the operator table: it picks
//! an operator, draws each attribute of its schema from a pool of values chosen by attribute name
//! (edges included), wires its inputs to earlier values, and keeps the node only if the graph
//! still validates. Input and parameter values favour the edges of their precision.

use cvm_engine::attrs::AttrKind;
use cvm_engine::exec::InputTensor;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::ops::{Arity, OPS};
use cvm_engine::tensor::precision_bound;
use cvm_engine::{TensorType, ValidatedModel};

/// A stream of choices: the given bytes first, then a deterministic pseudo-random continuation
/// seeded from them, so that any byte string yields a complete graph.
#[derive(Debug)]
pub struct ByteSource<'a> {
    bytes: &'a [u8],
    position: usize,
    state: u64,
}

impl<'a> ByteSource<'a> {
    /// A source reading `bytes`.
    pub fn new(bytes: &'a [u8]) -> ByteSource<'a> {
        let seed = bytes.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        ByteSource {
            bytes,
            position: 0,
            state: seed | 1,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        if self.position + 8 <= self.bytes.len() {
            let mut word = [0u8; 8];
            word.copy_from_slice(&self.bytes[self.position..self.position + 8]);
            self.position += 8;
            return u64::from_le_bytes(word);
        }
        // xorshift64* continuation.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A value in `low..=high`.
    pub fn range(&mut self, low: i64, high: i64) -> i64 {
        low + self.below((high - low + 1) as u64) as i64
    }

    /// True one time in `n`.
    pub fn chance(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A generated model and inputs for it.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The model; it always validates.
    pub model: Model,
    /// One tensor per declared input, within its precision.
    pub inputs: Vec<InputTensor>,
}

fn random_shape(source: &mut ByteSource<'_>) -> Vec<u32> {
    let rank = source.range(1, 4) as usize;
    (0..rank)
        .map(|_| match source.below(12) {
            0 => 6, // the row width of non_max_suppression
            1 => 0,
            _ => source.range(1, 4) as u32,
        })
        .collect()
}

/// Values within `precision`, often at its edges.
fn random_values(source: &mut ByteSource<'_>, count: usize, precision: u8) -> Vec<i32> {
    let bound = precision_bound(precision);
    (0..count)
        .map(|_| {
            let value = match source.below(6) {
                0 => bound,
                1 => -bound,
                2 => 0,
                3 => source.range(-1, 1),
                _ => source.range(-bound, bound),
            };
            value.clamp(-bound, bound) as i32
        })
        .collect()
}

fn random_precision(source: &mut ByteSource<'_>) -> u8 {
    match source.below(8) {
        0 => source.range(9, 32) as u8,
        1 => 1,
        _ => source.range(2, 8) as u8,
    }
}

fn ints(source: &mut ByteSource<'_>, len: usize, low: i64, high: i64) -> Vec<i64> {
    (0..len).map(|_| source.range(low, high)).collect()
}

/// A value for attribute `name` of kind `kind`, given the node's input types.
fn attribute(
    source: &mut ByteSource<'_>,
    name: &str,
    kind: AttrKind,
    inputs: &[TensorType],
) -> AttrValue {
    let rank = rank_of(inputs);
    match (name, kind) {
        (_, AttrKind::Bool) => AttrValue::Bool(source.chance(2)),
        ("in_dim", _) => AttrValue::Int(inputs.get(1).map_or(1, |t| t.shape.elements() as i64)),
        // Half the time within softmax's [2, 16]; every precision otherwise (requantize).
        ("precision", _) => AttrValue::Int(if source.chance(2) {
            source.range(2, 16)
        } else {
            source.range(1, 32)
        }),
        ("shift_bit", _) => AttrValue::Int(if source.chance(4) {
            source.range(1, 32)
        } else {
            source.range(1, 8)
        }),
        // A real scale m / 2^shift (requantize and the other transformer operators).
        ("multiplier", _) => AttrValue::Int(match source.below(4) {
            0 => source.pick(&[1, -1, i64::from(i32::MAX), -i64::from(i32::MAX)]),
            _ => source.range(1, 1 << 16),
        }),
        ("shift", _) => AttrValue::Int(if source.chance(4) {
            source.range(0, 62)
        } else {
            source.range(0, 20)
        }),
        // ε of layer_norm in 2^−16 units of the input's squared unit.
        ("epsilon", _) => AttrValue::Int(match source.below(4) {
            0 => source.pick(&[0, 1, i64::from(i32::MAX)]),
            _ => source.range(0, 1 << 20),
        }),
        ("a_min", _) => AttrValue::Int(source.range(-200, 0)),
        ("a_max", _) => AttrValue::Int(source.range(0, 200)),
        ("axis", AttrKind::Int) => AttrValue::Int(source.range(-rank - 1, rank)),
        ("axis", _) | ("axes", _) => {
            let len = source.range(0, rank.min(3)) as usize;
            AttrValue::Ints(ints(source, len, -rank, rank - 1))
        }
        ("pool_size", _) | ("kernel_size", _) => AttrValue::Ints(ints(source, 2, 1, 3)),
        ("strides", _) | ("dilation", _) | ("dilations", _) => {
            AttrValue::Ints(ints(source, 2, 1, 2))
        }
        ("paddings", _) => AttrValue::Ints(ints(source, 2, 0, 1)),
        ("conv_type", _) => AttrValue::Str(String::from("forward")),
        ("data_format", _) => AttrValue::Str(String::from(source.pick(&["NCHW", "NHWC"]))),
        ("padding_algorithm", _) => {
            AttrValue::Str(String::from(source.pick(&["EXPLICIT", "SAME", "VALID"])))
        }
        ("padding", _) => {
            let len = if source.chance(3) { 1 } else { 2 };
            AttrValue::Ints(ints(source, len, 0, 1))
        }
        ("groups", _) => AttrValue::Int(source.range(1, 4)),
        ("shape", _) => {
            let len = source.range(1, 3) as usize;
            AttrValue::Ints(
                (0..len)
                    .map(|_| source.pick(&[-1, 0, 1, 2, 3, 4, -2, -3]))
                    .collect(),
            )
        }
        ("reps", _) => {
            let len = source.range(1, 3) as usize;
            AttrValue::Ints(ints(source, len, 1, 3))
        }
        ("begin", _) | ("end", _) => {
            let len = source.range(0, rank) as usize;
            AttrValue::Ints(ints(source, len, -4, 4))
        }
        ("stride", _) => {
            let len = source.range(0, rank) as usize;
            AttrValue::Ints(
                (0..len)
                    .map(|_| source.pick(&[1, 1, 2, -1, -2, 3]))
                    .collect(),
            )
        }
        ("iou_threshold", _) => AttrValue::Int(source.range(1, 101)),
        // generate_proposals_v2: values inside the ranges at small frac_bits.
        ("pre_nms_top_n", _) | ("post_nms_top_n", _) => AttrValue::Int(source.range(1, 6)),
        ("nms_thresh", _) => AttrValue::Int(source.range(1, 2)),
        ("min_size", _) => AttrValue::Int(source.range(0, 8)),
        ("eta", _) => AttrValue::Int(source.range(1, 24)),
        ("kind", _) => AttrValue::Str(String::from(source.pick(&[
            "kEq", "kNe", "kGe", "kGt", "kLe", "kLt", "kSum", "kProd", "kMax", "kMin",
        ]))),
        ("dim", _) => {
            let dims: Vec<i64> = (0..rank).filter(|_| source.chance(2)).collect();
            AttrValue::Ints(dims)
        }
        ("out_shape", _) => {
            let mut shape = vec![source.range(1, 3)];
            shape.extend(inputs.first().map_or(Vec::new(), |t| {
                t.dims().iter().map(|&d| i64::from(d)).collect()
            }));
            AttrValue::Ints(shape)
        }
        ("broadcast_axes", _) => AttrValue::Ints((1..=rank).collect()),
        ("coord_start", _) => AttrValue::Int(2),
        ("score_index", _) => AttrValue::Int(1),
        ("id_index", _) => AttrValue::Int(0),
        (_, AttrKind::Int) => AttrValue::Int(source.range(-2, 4)),
        (_, AttrKind::Fixed) => AttrValue::Int(source.range(-1 << 12, 1 << 12)),
        (_, AttrKind::Ints) => {
            let len = source.range(0, 2) as usize;
            AttrValue::Ints(ints(source, len, -2, 4))
        }
        ("layout", _) => AttrValue::Str(String::from("NCHW")),
        ("kernel_layout", _) => AttrValue::Str(String::from("OIHW")),
        ("method", _) => AttrValue::Str(String::from("NEAREST_NEIGHBOR")),
        (_, AttrKind::Str) => AttrValue::Str(String::from("same")),
    }
}

/// Adds a parameter of `shape` and `precision` with edge-biased values; returns its reference.
fn add_param(
    source: &mut ByteSource<'_>,
    model: &mut Model,
    shape: Vec<u32>,
    precision: u8,
) -> (ValueRef, TensorType) {
    let count = shape.iter().map(|&d| d as usize).product();
    let index = model.params.len();
    let data = ParamData::narrowest(random_values(source, count, precision));
    model.params.push(ParamDecl {
        name: format!("p{index}"),
        shape: shape.clone(),
        precision,
        data,
    });
    (
        ValueRef::Param(index as u32),
        TensorType::new(shape, precision),
    )
}

/// For operators whose operands must agree closely (weights of conv2d and dense, the second
/// matrix of batch_matmul, gamma and beta of layer_norm, the rows and counts of
/// non_max_suppression, the five tensors of generate_proposals_v2), sometimes synthesizes
/// parameters that fit the first operand, so that every operator is generated.
fn companions(
    source: &mut ByteSource<'_>,
    model: &mut Model,
    op: &str,
    attrs: &[Attr],
    picks: &mut Vec<(ValueRef, TensorType)>,
) {
    let Some((first_ref, first)) = picks.first().cloned() else {
        return;
    };
    let dims = first.dims().to_vec();
    let precision = source.range(1, 8) as u8;
    let int_attr = |name: &str, default: i64| {
        attrs
            .iter()
            .find(|a| a.name == name)
            .map_or(default, |a| match a.value {
                AttrValue::Int(v) => v,
                _ => default,
            })
    };
    let use_bias = attrs
        .iter()
        .find(|a| a.name == "use_bias")
        .is_none_or(|a| a.value == AttrValue::Bool(true));
    match op {
        "BnGradBiasScale" if dims.len() >= 2 => {
            picks.truncate(1);
            picks.push((first_ref, first.clone()));
            picks.push(add_param(source, model, vec![dims[1]], precision));
        }
        "conv2d" | "Conv" => {
            let groups = int_attr("groups", 1).clamp(1, 4) as u32;
            picks.clear();
            if dims.len() == 4 && dims[1] > 0 && dims[1] % groups == 0 && first.precision <= 8 {
                picks.push((first_ref, first));
            } else {
                let shape = vec![
                    source.range(1, 2) as u32,
                    groups * source.range(1, 2) as u32,
                    source.range(2, 5) as u32,
                    source.range(2, 5) as u32,
                ];
                picks.push(add_param(source, model, shape, precision));
            }
            let channels = picks[0].1.dims()[1];
            let kernel = source.range(1, 2) as u32;
            let out_channels = groups * source.range(1, 2) as u32;
            picks.push(add_param(
                source,
                model,
                vec![out_channels, channels / groups, kernel, kernel],
                precision,
            ));
            if use_bias {
                let bias_precision = source.range(1, 16) as u8;
                picks.push(add_param(source, model, vec![out_channels], bias_precision));
            }
        }
        "layer_norm" if !dims.is_empty() => {
            // gamma and beta of the last axis's length.
            let length = dims[dims.len() - 1];
            picks.truncate(1);
            let gamma_precision = source.range(1, 16) as u8;
            picks.push(add_param(source, model, vec![length], gamma_precision));
            let beta_precision = source.range(1, 32) as u8;
            picks.push(add_param(source, model, vec![length], beta_precision));
        }
        "dense" => {
            let units = source.range(1, 4) as u32;
            picks.clear();
            if dims.len() == 2 {
                picks.push((first_ref, first));
            } else {
                let shape = vec![source.range(1, 3) as u32, source.range(1, 6) as u32];
                picks.push(add_param(source, model, shape, precision));
            }
            let depth = picks[0].1.dims()[1];
            picks.push(add_param(source, model, vec![units, depth], precision));
            if use_bias {
                let bias_precision = source.range(1, 16) as u8;
                picks.push(add_param(source, model, vec![units], bias_precision));
            }
        }
        "batch_matmul" => {
            // B fitting A's K (and its leading axes, or a broadcast of them), in either layout.
            let transpose_b = attrs
                .iter()
                .any(|a| a.name == "transpose_b" && a.value == AttrValue::Bool(true));
            picks.clear();
            if dims.len() >= 2 && first.precision <= 8 {
                picks.push((first_ref, first));
            } else {
                let shape = vec![
                    source.range(1, 3) as u32,
                    source.range(1, 5) as u32,
                    source.range(1, 6) as u32,
                ];
                picks.push(add_param(source, model, shape, precision));
            }
            let a = picks[0].1.dims().to_vec();
            let (lead, k) = (&a[..a.len() - 2], a[a.len() - 1]);
            let n = source.range(1, 5) as u32;
            let mut shape: Vec<u32> = lead
                .iter()
                .map(|&d| if source.chance(4) { 1 } else { d })
                .collect();
            shape.extend(if transpose_b { [n, k] } else { [k, n] });
            picks.push(add_param(source, model, shape, precision));
        }
        "generate_proposals_v2" => {
            // scores [N, H, W, A], bbox_deltas [N, H, W, 4A], im_shape [N, 2], anchors and
            // variances [H, W, A, 4]; N may be 0.
            let n = source.range(0, 2) as u32;
            let (h, w, a) = (
                source.range(1, 3) as u32,
                source.range(1, 3) as u32,
                source.range(1, 3) as u32,
            );
            picks.clear();
            let scores_precision = source.range(1, 12) as u8;
            picks.push(add_param(source, model, vec![n, h, w, a], scores_precision));
            let delta_precision = source.range(1, 8) as u8;
            picks.push(add_param(
                source,
                model,
                vec![n, h, w, 4 * a],
                delta_precision,
            ));
            let im_precision = source.range(2, 10) as u8;
            picks.push(add_param(source, model, vec![n, 2], im_precision));
            let anchor_precision = source.range(2, 10) as u8;
            picks.push(add_param(source, model, vec![h, w, a, 4], anchor_precision));
            let variance_precision = source.range(1, 6) as u8;
            picks.push(add_param(
                source,
                model,
                vec![h, w, a, 4],
                variance_precision,
            ));
        }
        "softmax" if picks.len() == 2 => {
            // A keep mask that broadcasts to the scores: a suffix of their shape, some axes 1.
            picks.truncate(1);
            let shape: Vec<u32> = dims[dims.len() - source.below(dims.len() as u64 + 1) as usize..]
                .iter()
                .map(|&d| if source.chance(3) { 1 } else { d })
                .collect();
            picks.push(add_param(source, model, shape, 2));
        }
        "non_max_suppression" => {
            let (batches, rows) = (source.range(1, 2) as u32, source.range(1, 5) as u32);
            picks.clear();
            let box_precision = source.range(2, 12) as u8;
            picks.push(add_param(
                source,
                model,
                vec![batches, rows, 6],
                box_precision,
            ));
            picks.push(add_param(source, model, vec![batches], 4));
        }
        _ => {}
    }
}

/// The rank of the first operand (1 when there is none).
fn rank_of(types: &[TensorType]) -> i64 {
    types.first().map_or(1, |t| t.shape.rank() as i64)
}

/// Generates a valid model of at most `max_nodes` nodes, and inputs for it.
pub fn generate(source: &mut ByteSource<'_>, max_nodes: usize) -> Generated {
    let n_inputs = source.range(1, 2) as usize;
    let inputs: Vec<InputDecl> = (0..n_inputs)
        .map(|i| InputDecl {
            name: format!("in{i}"),
            shape: random_shape(source),
            precision: random_precision(source),
        })
        .collect();
    let params: Vec<ParamDecl> = (0..source.range(0, 3))
        .map(|i| {
            let shape = random_shape(source);
            let precision = random_precision(source);
            let count = shape.iter().map(|&d| d as usize).product();
            ParamDecl {
                name: format!("p{i}"),
                data: ParamData::narrowest(random_values(source, count, precision)),
                shape,
                precision,
            }
        })
        .collect();
    let mut model = Model {
        inputs,
        params,
        nodes: Vec::new(),
        outputs: vec![OutputDecl {
            name: String::from("out"),
            value: ValueRef::Input(0),
        }],
    };
    let mut values: Vec<(ValueRef, TensorType)> = model
        .inputs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            (
                ValueRef::Input(i as u32),
                TensorType::new(d.shape.clone(), d.precision),
            )
        })
        .chain(model.params.iter().enumerate().map(|(i, d)| {
            (
                ValueRef::Param(i as u32),
                TensorType::new(d.shape.clone(), d.precision),
            )
        }))
        .collect();

    for attempt in 0..max_nodes * 12 {
        if model.nodes.len() >= max_nodes {
            break;
        }
        let op = &OPS[source.below(OPS.len() as u64) as usize];
        let arity = match op.arity {
            Arity::Exactly(k) => k,
            Arity::Between(low, high) => source.range(low as i64, high as i64) as usize,
            Arity::AtLeast(low) => source.range(low as i64, low as i64 + 2) as usize,
        };
        // Prefer recent values so graphs grow deep, not only wide.
        let mut picks: Vec<(ValueRef, TensorType)> = (0..arity)
            .map(|_| {
                let index = if source.chance(2) {
                    values.len() - 1
                } else {
                    source.below(values.len() as u64) as usize
                };
                values[index].clone()
            })
            .collect();
        let types: Vec<TensorType> = picks.iter().map(|(_, t)| t.clone()).collect();
        let mut attrs: Vec<Attr> = Vec::new();
        for spec in op.attrs {
            // Attributes most operators require are always drawn; the rest half the time.
            let required = matches!(
                spec.name,
                "in_dim" | "kind" | "value" | "out_shape" | "broadcast_axes"
            );
            if required || source.chance(2) {
                attrs.push(Attr {
                    name: spec.name.to_string(),
                    value: attribute(source, spec.name, spec.kind, &types),
                });
            }
        }
        if op.name == "Slice" && source.chance(2) {
            // axes, starts and ends must have one length: a one-axis box.
            let start = source.range(-2, 2);
            attrs = vec![
                Attr {
                    name: String::from("axes"),
                    value: AttrValue::Ints(vec![source.range(0, rank_of(&types) - 1)]),
                },
                Attr {
                    name: String::from("ends"),
                    value: AttrValue::Ints(vec![source.range(start + 1, 4)]),
                },
                Attr {
                    name: String::from("starts"),
                    value: AttrValue::Ints(vec![start]),
                },
            ];
        }
        attrs.sort_by(|a, b| a.name.cmp(&b.name));
        if source.chance(2) {
            companions(source, &mut model, op.name, &attrs, &mut picks);
        }
        let index = model.nodes.len() as u32;
        model.nodes.push(Node {
            name: format!("n{attempt}"),
            op: op.code,
            inputs: picks.iter().map(|(r, _)| *r).collect(),
            attrs,
        });
        model.outputs = vec![OutputDecl {
            name: String::from("out"),
            value: ValueRef::Node {
                node: index,
                output: 0,
            },
        }];
        match ValidatedModel::from_bytes(&model.encode(), &cvm_engine::gas::Schedule::V1) {
            Ok(validated) => {
                let node = &validated.nodes[index as usize];
                for (output, ty) in node.output_types.iter().enumerate() {
                    values.push((
                        ValueRef::Node {
                            node: index,
                            output: output as u8,
                        },
                        ty.clone(),
                    ));
                }
            }
            Err(_) => {
                model.nodes.pop();
            }
        }
    }

    // Outputs: one to three values, the last node's first.
    let mut outputs = Vec::new();
    if let Some((last, _)) = values.last() {
        outputs.push(*last);
    }
    for _ in 0..source.below(3) {
        let (candidate, _) = values[source.below(values.len() as u64) as usize].clone();
        if !outputs.contains(&candidate) {
            outputs.push(candidate);
        }
    }
    model.outputs = outputs
        .into_iter()
        .enumerate()
        .map(|(i, value)| OutputDecl {
            name: format!("out{i}"),
            value,
        })
        .collect();

    let inputs = model
        .inputs
        .iter()
        .map(|decl| {
            let count = decl.shape.iter().map(|&d| d as usize).product();
            InputTensor {
                shape: decl.shape.clone(),
                data: random_values(source, count, decl.precision),
            }
        })
        .collect();
    Generated { model, inputs }
}
