//! The integer model: every value of the float graph becomes a CVM tensor `q` with a real
//! scale `s`, the float value being approximately `q · s`.
//!
//! - Activations are int8 (precision 8, −127..=127) with `s = range / 127`, the range measured
//!   on the calibration set: the largest |value|, or, for a value read only by relu-like steps,
//!   the largest value those steps let through.
//! - Weights are int8 with a scale per output channel (per tensor with `per_channel` off, and
//!   always for the layer that produces the model's output, so that its outputs share one
//!   scale); biases are int32 at the accumulator's scale `s_x · s_w`.
//! - Requantization from an accumulator to int8 is `broadcast_mul` by an integer factor M (one
//!   per channel, at most 2^15 − 1) then `cvm_right_shift` by n, which rounds and clips to
//!   ±127: `q_y = clip(round(acc · M / 2^n))` with `M / 2^n ≈ s_acc / s_y`. An accumulator of
//!   precision above 16 is first brought to 16 bits by `cvm_right_shift` (or only `cvm_clip`
//!   when its calibrated range already fits), so that the product fits 32 bits; the values it
//!   would clip there would saturate at ±127 anyway.
//! - The output layer (a convolution or dense layer) is left at its accumulator: int32 logits
//!   at scale `s_x · s_w`, so argmax loses nothing to a last rounding.

use super::calibrate::Stats;
use super::float::function;
use super::graph::{FTensor, Graph, InputKind, Op};
use super::write::{CvmGraph, bits, tuple};
use super::{ImportError, LayerReport, RangeReport, Ranges};

/// The largest factor M of a requantization: M has precision 16.
const MAX_FACTOR: f64 = 32_767.0;

/// An integer tensor standing for a float value: `value ≈ q · scale`.
#[derive(Clone, Copy, Debug)]
struct Q {
    entry: usize,
    scale: f64,
    precision: u32,
}

/// What quantization produced.
pub struct Quantized {
    /// The CVM graph.
    pub graph: CvmGraph,
    /// Its output node.
    pub head: usize,
    /// The input's scale: `q = clip(round(x / scale), −127, 127)`.
    pub input_scale: f64,
    /// The output's scale: `y ≈ q · scale`.
    pub output_scale: f64,
    /// Per-layer figures for the report.
    pub layers: Vec<LayerReport>,
}

/// `x` rounded to the nearest integer, halves away from zero (exact in IEEE 754).
pub fn round(x: f64) -> f64 {
    x.round()
}

/// Builds the integer model of `graph` with the calibrated `stats` (one per value).
///
/// # Errors
/// A value with no integer form at these scales (a bias beyond int32, a factor beyond 2^15),
/// named.
pub fn quantize(
    graph: &Graph,
    stats: &[Stats],
    per_channel: bool,
    ranges: Option<Ranges>,
) -> Result<Quantized, ImportError> {
    let engine_only = graph.values.iter().any(|v| v.op.engine_only());
    let ranges = ranges.unwrap_or(if engine_only {
        Ranges::Mse
    } else {
        Ranges::Max
    });
    let mut q = Quantizer {
        graph,
        consumers: graph.consumers(),
        stats,
        per_channel,
        ranges,
        cvm: CvmGraph::default(),
        values: vec![None; graph.values.len()],
        fine: vec![None; graph.values.len()],
        layers: Vec::new(),
        engine_only,
        needed: needed(graph),
    };
    let needed = q.needed.clone();
    let mut output_scale = 1.0;
    for (id, &needed) in needed.iter().enumerate() {
        if !needed || matches!(graph.values[id].op, Op::Const(_)) {
            continue;
        }
        let value = q.value(id)?;
        if id == graph.output {
            output_scale = value.scale;
        }
        q.values[id] = Some(value);
    }
    let head = q.values[graph.output]
        .as_ref()
        .map(|v| v.entry)
        .ok_or_else(|| ImportError::Graph("the output has no integer form".into()))?;
    let input_scale = q.values[0].as_ref().map_or(1.0, |v| v.scale);
    Ok(Quantized {
        graph: q.cvm,
        head,
        input_scale,
        output_scale,
        layers: q.layers,
    })
}

/// The values the output depends on.
fn needed(graph: &Graph) -> Vec<bool> {
    let mut needed = vec![false; graph.values.len()];
    needed[graph.output] = true;
    for id in (0..graph.values.len()).rev() {
        if needed[id] {
            for &input in &graph.values[id].inputs {
                needed[input] = true;
            }
        }
    }
    for flag in needed.iter_mut().take(graph.inputs.len()) {
        *flag = true;
    }
    needed
}

/// A scale for `range`: range / 127, or 1 for a value that is always 0.
fn scale_for(range: f64) -> f64 {
    if range > 0.0 { range / 127.0 } else { 1.0 }
}

/// A scale for `range` at int16: range / 32767, or 1 for a value that is always 0.
fn wide_scale_for(range: f64) -> f64 {
    if range > 0.0 { range / 32_767.0 } else { 1.0 }
}

/// The values of a tensor at one scale, and the scale: int8, or int16 when `wide` (a table or
/// constant summed into a transformer's residual stream, whose small entries int8 would round
/// away beside its largest).
fn quantize_tensor(data: &[f64], wide: bool) -> (Vec<i32>, f64) {
    if !wide {
        let (values, scales) = quantize_rows(data, 1, false);
        return (values, scales[0]);
    }
    let scale = wide_scale_for(data.iter().fold(0.0f64, |m, v| m.max(v.abs())));
    let values = data
        .iter()
        .map(|&v| round(v / scale).clamp(-32_767.0, 32_767.0) as i32)
        .collect();
    (values, scale)
}

/// int8 values of `data` at per-row scales (`rows` rows), and the scales.
fn quantize_rows(data: &[f64], rows: usize, per_row: bool) -> (Vec<i32>, Vec<f64>) {
    let per = data.len() / rows.max(1);
    let all = data.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scales: Vec<f64> = (0..rows)
        .map(|r| {
            if per_row {
                scale_for(
                    data[r * per..(r + 1) * per]
                        .iter()
                        .fold(0.0f64, |m, v| m.max(v.abs())),
                )
            } else {
                scale_for(all)
            }
        })
        .collect();
    let values = data
        .iter()
        .enumerate()
        .map(|(i, &w)| round(w / scales[i / per.max(1)]).clamp(-127.0, 127.0) as i32)
        .collect();
    (values, scales)
}

/// int8 weights of `rows` rows: at the model's own scales when it has them (QDQ; one scale,
/// or one per row), else chosen here: per row when `per_channel`, per tensor for the layer
/// whose accumulators are the output (so that they compare).
fn weights_at(
    data: &[f64],
    rows: usize,
    fixed: Option<&[f64]>,
    per_channel: bool,
    is_output: bool,
) -> (Vec<i32>, Vec<f64>) {
    match fixed {
        Some(scales) if scales.len() == 1 || (scales.len() == rows && !is_output) => {
            let scales: Vec<f64> = (0..rows).map(|r| scales[r.min(scales.len() - 1)]).collect();
            let per = data.len() / rows.max(1);
            let values = data
                .iter()
                .enumerate()
                .map(|(i, &w)| round(w / scales[i / per.max(1)]).clamp(-127.0, 127.0) as i32)
                .collect();
            (values, scales)
        }
        _ => quantize_rows(data, rows, per_channel && !is_output),
    }
}

/// What [`Quantizer::layer`] builds a conv2d or dense node from.
struct Layer<'a> {
    /// Weights, output channels (or units) first.
    weight: &'a FTensor,
    /// The model's own weight scales (QDQ), if any.
    fixed_scales: Option<&'a [f64]>,
    /// Float bias per output channel, if any.
    bias: Option<&'a [f64]>,
    /// `conv2d` or `dense`.
    op: &'static str,
    /// The operator's attributes but `use_bias`.
    attrs: Vec<(&'static str, String)>,
}

struct Quantizer<'a> {
    graph: &'a Graph,
    /// [`Graph::consumers`], computed once.
    consumers: Vec<Vec<usize>>,
    stats: &'a [Stats],
    per_channel: bool,
    ranges: Ranges,
    cvm: CvmGraph,
    values: Vec<Option<Q>>,
    /// A layer normalization's int16 output, which the sums that read it (the residual
    /// stream) take in place of its int8 rounding.
    fine: Vec<Option<Q>>,
    layers: Vec<LayerReport>,
    /// The graph needs the engine's own operators (a transformer): its residual stream may
    /// be wider than 8 bits.
    engine_only: bool,
    /// [`needed`]: the values the output depends on.
    needed: Vec<bool>,
}

impl Quantizer<'_> {
    fn error(&self, id: usize, message: impl Into<String>) -> ImportError {
        ImportError::Node {
            node: self.graph.values[id].origin.clone(),
            message: message.into(),
        }
    }

    fn input(&mut self, id: usize, k: usize) -> Result<Q, ImportError> {
        let source = self.graph.values[id].inputs[k];
        if let Some(q) = &self.values[source] {
            return Ok(*q);
        }
        // A constant operand: int8 at its own scale, int16 in a sum of the residual stream.
        let Op::Const(tensor) = &self.graph.values[source].op else {
            return Err(self.error(id, "an operand has no integer form"));
        };
        let wide = matches!(self.graph.values[id].op, Op::Add | Op::Sub) && self.wide(id);
        let (values, scale) = quantize_tensor(&tensor.data, wide);
        let name = format!("{}_const", self.graph.values[source].name);
        // A scalar is a CVM tensor of one element, which broadcasts alike.
        let shape: &[usize] = if tensor.shape.is_empty() {
            &[1]
        } else {
            &tensor.shape
        };
        let (entry, precision) = self.cvm.param(&name, shape, values);
        let q = Q {
            entry,
            scale,
            precision,
        };
        self.values[source] = Some(q);
        Ok(q)
    }

    /// Operand `k` of sum `id`: a layer normalization's int16 output where it has one, else
    /// [`Quantizer::input`].
    fn summand(&mut self, id: usize, k: usize) -> Result<Q, ImportError> {
        match self.fine[self.graph.values[id].inputs[k]] {
            Some(q) => Ok(q),
            None => self.input(id, k),
        }
    }

    /// The scale value `id` is requantized to: its range, or for a value read only by relu or
    /// a clip at or above 0 (and not the output), the largest value they let through.
    fn target_scale(&self, id: usize) -> f64 {
        let consumers = &self.consumers[id];
        // A model quantized already (QDQ) gives the scale itself.
        let fixed: Vec<f64> = consumers
            .iter()
            .filter_map(|&c| match self.graph.values[c].op {
                Op::Fake(scale) => Some(scale),
                _ => None,
            })
            .collect();
        if !fixed.is_empty()
            && fixed.len() == consumers.len()
            && fixed.iter().all(|&s| s == fixed[0])
        {
            return fixed[0];
        }
        let relu_like = |c: usize| match self.graph.values[c].op {
            Op::Relu => true,
            Op::Clip { lo, .. } => lo >= 0.0,
            _ => false,
        };
        if id != self.graph.output
            && !consumers.is_empty()
            && consumers.iter().all(|&c| relu_like(c))
        {
            let range = consumers
                .iter()
                .map(|&c| self.range(c))
                .fold(0.0f64, f64::max);
            return scale_for(range);
        }
        if self.wide(id) {
            return wide_scale_for(self.stats[id].max_abs);
        }
        scale_for(self.range(id))
    }

    /// The calibrated range of int8 value `id`, as [`Ranges`] chooses it; the output's is
    /// always its largest |v|.
    fn range(&self, id: usize) -> f64 {
        match self.ranges {
            Ranges::Mse if !self.is_output(id) => self.stats[id].mse_range(),
            _ => self.stats[id].max_abs,
        }
    }

    /// Whether value `id` belongs to a transformer's residual stream, which stays int16 (the
    /// engine's layer_norm reads any precision): it is read only by layer normalizations and
    /// sums, directly or through reshapes (values the output does not depend on, such as the
    /// steps of a layer normalization written out, do not count).
    fn wide(&self, id: usize) -> bool {
        self.engine_only
            && id != self.graph.output
            // A float input is int8, whatever reads it.
            && !matches!(self.graph.values[id].op, Op::Input(_))
            && self.consumers[id].iter().any(|&c| self.needed[c])
            && self.consumers[id]
                .iter()
                .filter(|&&c| self.needed[c])
                .all(|&c| match self.graph.values[c].op {
                    Op::LayerNorm(_) | Op::Add | Op::Sub => true,
                    Op::Reshape => self.wide(c),
                    _ => false,
                })
    }

    /// Whether value `id` is the model's output, or the one value a reshape that is the
    /// output reads (a dense layer on the rows of a per-token output).
    fn is_output(&self, id: usize) -> bool {
        let output = &self.graph.values[self.graph.output];
        id == self.graph.output
            || (matches!(output.op, Op::Reshape)
                && output.inputs == [id]
                && self.consumers[id] == [self.graph.output])
    }

    fn shape(&self, id: usize) -> &[usize] {
        &self.graph.values[id].shape
    }

    fn name(&self, id: usize) -> String {
        self.graph.values[id].name.clone()
    }

    fn value(&mut self, id: usize) -> Result<Q, ImportError> {
        let value = &self.graph.values[id];
        let shape = value.shape.clone();
        let name = self.name(id);
        match &value.op {
            Op::Input(k) => {
                // One input keeps the CVM name `data`; several their own names.
                let input_name = if self.graph.inputs.len() == 1 {
                    "data".to_string()
                } else {
                    name.clone()
                };
                match self.graph.inputs[*k].kind {
                    // Token ids pass through unquantized: precision enough for every row of
                    // the largest table that reads them.
                    InputKind::Ids { rows, .. } => {
                        let precision = bits(rows.saturating_sub(1) as u64) + 1;
                        let entry = self.cvm.input_named(&input_name, &shape, precision);
                        Ok(Q {
                            entry,
                            scale: 1.0,
                            precision,
                        })
                    }
                    // A mask's 0s and 1s, as they are.
                    InputKind::Mask => {
                        let entry = self.cvm.input_named(&input_name, &shape, 2);
                        Ok(Q {
                            entry,
                            scale: 1.0,
                            precision: 2,
                        })
                    }
                    InputKind::Float => {
                        let entry = self.cvm.input_named(&input_name, &shape, 8);
                        Ok(Q {
                            entry,
                            scale: self.target_scale(id),
                            precision: 8,
                        })
                    }
                }
            }
            Op::Embedding(table) => {
                let ids = self.input(id, 0)?;
                let (values, scale) = quantize_tensor(&table.data, self.wide(id));
                let (t, precision) = self
                    .cvm
                    .param(&format!("{name}_table"), &table.shape, values);
                let attrs = vec![("axis", "0".into())];
                let entry = self.cvm.op(&name, "take", &[t, ids.entry], attrs, &shape);
                Ok(Q {
                    entry,
                    scale,
                    precision,
                })
            }
            Op::Fake(scale) => {
                let x = self.input(id, 0)?;
                if x.scale == *scale && x.precision <= 8 {
                    return Ok(x);
                }
                let xmax = self.stats[value.inputs[0]].max_abs / x.scale;
                let ratio = x.scale / scale;
                self.requant(id, x, xmax, &[ratio], *scale, &name, &shape)
            }
            Op::Const(_) => Err(self.error(id, "a constant output")),
            Op::MatMul { transpose_b, alpha } => {
                let a = self.input(id, 0)?;
                let b = self.input(id, 1)?;
                if a.precision > 8 || b.precision > 8 {
                    return Err(self.error(id, "a product of two tensors needs int8 operands"));
                }
                if !(*alpha > 0.0 && alpha.is_finite()) {
                    return Err(self.error(
                        id,
                        format!("the factor {alpha} of the product is not positive"),
                    ));
                }
                let k = self
                    .shape(self.graph.values[id].inputs[0])
                    .last()
                    .copied()
                    .unwrap_or(1);
                let flag = if *transpose_b { "True" } else { "False" };
                let attrs = vec![("transpose_b", flag.into())];
                let softmax_only = !self.consumers[id].is_empty()
                    && self.consumers[id]
                        .iter()
                        .all(|&c| matches!(self.graph.values[c].op, Op::Softmax { .. }));
                let acc_name = if softmax_only {
                    name.clone()
                } else {
                    format!("{name}_acc")
                };
                let entry = self.cvm.op(
                    &acc_name,
                    "batch_matmul",
                    &[a.entry, b.entry],
                    attrs,
                    &shape,
                );
                let scale = a.scale * b.scale * alpha;
                let acc = Q {
                    entry,
                    scale,
                    precision: a.precision + b.precision + bits(k as u64),
                };
                if softmax_only {
                    return Ok(acc);
                }
                let target = self.target_scale(id);
                let xmax = self.stats[id].max_abs / scale;
                self.requant(id, acc, xmax, &[scale / target], target, &name, &shape)
            }
            Op::Softmax { causal, masked } => {
                let x = self.input(id, 0)?;
                let mut operands = vec![x.entry];
                if *masked {
                    operands.push(self.input(id, 1)?.entry);
                }
                let (multiplier, shift) = real_factor(x.scale).ok_or_else(|| {
                    self.error(
                        id,
                        format!("the scores' scale {} has no multiplier and shift", x.scale),
                    )
                })?;
                let attrs = vec![
                    ("causal", if *causal { "True" } else { "False" }.into()),
                    ("multiplier", multiplier.to_string()),
                    ("precision", "8".into()),
                    ("shift", shift.to_string()),
                ];
                let entry = self.cvm.op(&name, "softmax", &operands, attrs, &shape);
                Ok(Q {
                    entry,
                    scale: 1.0 / 128.0,
                    precision: 8,
                })
            }
            Op::LayerNorm(norm) => {
                let x = self.input(id, 0)?;
                let target = self.target_scale(id);
                // layer_norm adds β after its one rounding, so β rounded at the int8 scale
                // would shift each channel by up to half a step for every token alike, an
                // error that mean pooling keeps whole. The norm is computed at int16 with
                // FRACTION more bits, and then rounded to int8 once per element.
                const FRACTION: u32 = 8;
                let fine = target / pow2(FRACTION);
                let gamma: Vec<f64> = norm.gamma.iter().map(|g| g / fine).collect();
                let largest = gamma.iter().fold(0.0f64, |m, g| m.max(g.abs()));
                // γ carries `shift` fraction bits within 16 bits of precision.
                let shift = (0..=62u32)
                    .rev()
                    .find(|&k| round(largest * pow2(k)) <= 32_767.0)
                    .ok_or_else(|| {
                        self.error(id, format!("γ / scale reaches {largest}, beyond 16 bits"))
                    })?;
                let gamma: Vec<i32> = gamma
                    .iter()
                    .map(|g| round(g * pow2(shift)) as i32)
                    .collect();
                let mut beta = Vec::with_capacity(norm.beta.len());
                for &b in &norm.beta {
                    let v = round(b / fine);
                    if v.abs() >= f64::from(1u32 << 30) {
                        return Err(self.error(id, format!("β = {b} is beyond int32 at its scale")));
                    }
                    beta.push(v as i32);
                }
                // ε in units of 2^−16 of the input's unit squared (layer_norm's `epsilon`).
                let epsilon =
                    round(norm.epsilon / (x.scale * x.scale) * pow2(16)).min(f64::from(i32::MAX));
                let n = norm.gamma.len();
                let (g, _) = self.cvm.param(&format!("{name}_gamma"), &[n], gamma);
                let (b, _) = self.cvm.param(&format!("{name}_beta"), &[n], beta);
                let attrs = vec![
                    ("epsilon", (epsilon as i64).to_string()),
                    ("precision", "16".into()),
                    ("rms", if norm.rms { "True" } else { "False" }.into()),
                    ("shift", shift.to_string()),
                ];
                let normed = self.cvm.op(
                    &format!("{name}_16"),
                    "layer_norm",
                    &[x.entry, g, b],
                    attrs,
                    &shape,
                );
                let fine = Q {
                    entry: normed,
                    scale: fine,
                    precision: 16,
                };
                let sums_only = !self.is_output(id)
                    && self.consumers[id]
                        .iter()
                        .filter(|&&c| self.needed[c])
                        .all(|&c| matches!(self.graph.values[c].op, Op::Add | Op::Sub));
                if sums_only {
                    return Ok(fine);
                }
                self.fine[id] = Some(fine);
                let attrs = vec![
                    ("precision", "8".into()),
                    ("shift_bit", FRACTION.to_string()),
                ];
                let entry = self
                    .cvm
                    .op(&name, "cvm_right_shift", &[normed], attrs, &shape);
                Ok(Q {
                    entry,
                    scale: target,
                    precision: 8,
                })
            }
            Op::Pad(_) => Err(self.error(id, "a Pad that no convolution or pooling absorbed")),
            Op::Conv(conv) => {
                let kernel = [conv.weight.shape[2], conv.weight.shape[3]];
                let attrs = vec![
                    ("channels", conv.weight.shape[0].to_string()),
                    ("kernel_size", tuple(&kernel)),
                    ("strides", tuple(&conv.strides)),
                    ("padding", tuple(&conv.pads)),
                    ("dilation", tuple(&conv.dilations)),
                    ("groups", conv.groups.to_string()),
                ];
                let layer = Layer {
                    weight: &conv.weight,
                    fixed_scales: conv.weight_scales.as_deref(),
                    bias: conv.bias.as_deref(),
                    op: "conv2d",
                    attrs,
                };
                self.layer(id, layer, &shape, &name)
            }
            Op::Dense(dense) => {
                let layer = Layer {
                    weight: &dense.weight,
                    fixed_scales: dense.weight_scales.as_deref(),
                    bias: dense.bias.as_deref(),
                    op: "dense",
                    attrs: vec![("units", dense.weight.shape[0].to_string())],
                };
                self.layer(id, layer, &shape, &name)
            }
            Op::Relu => {
                let x = self.input(id, 0)?;
                let entry = self.cvm.op(&name, "relu", &[x.entry], Vec::new(), &shape);
                Ok(Q { entry, ..x })
            }
            Op::Clip { lo, hi } => {
                let x = self.input(id, 0)?;
                let bound = |v: f64| {
                    if v.is_finite() {
                        round(v / x.scale).clamp(-127.0, 127.0) as i64
                    } else if v > 0.0 {
                        127
                    } else {
                        -127
                    }
                };
                let (a, b) = (bound(*lo), bound(*hi));
                if a <= -127 && b >= 127 {
                    return Ok(x);
                }
                if a >= b {
                    return Err(self.error(
                        id,
                        format!(
                            "the bounds [{lo}, {hi}] fall within one step of the input's scale"
                        ),
                    ));
                }
                if a == 0 && b >= 127 && x.precision <= 8 {
                    let entry = self.cvm.op(&name, "relu", &[x.entry], Vec::new(), &shape);
                    return Ok(Q { entry, ..x });
                }
                let attrs = vec![("a_min", a.to_string()), ("a_max", b.to_string())];
                // The deployed rule gives a clip at ±127 precision 9 (bits(128) + 1); a
                // cvm_clip to 8 bits, which changes no value, brings it back.
                let precision = bits(a.unsigned_abs().max(b.unsigned_abs()) + 1) + 1;
                if precision <= 8 {
                    let entry = self.cvm.op(&name, "clip", &[x.entry], attrs, &shape);
                    return Ok(Q {
                        entry,
                        precision,
                        ..x
                    });
                }
                let clipped =
                    self.cvm
                        .op(&format!("{name}_clip"), "clip", &[x.entry], attrs, &shape);
                let attrs = vec![("precision", "8".into())];
                let entry = self.cvm.op(&name, "cvm_clip", &[clipped], attrs, &shape);
                Ok(Q {
                    entry,
                    precision: 8,
                    ..x
                })
            }
            Op::MaxPool(pool) => {
                let x = self.input(id, 0)?;
                let attrs = vec![
                    ("pool_size", tuple(&pool.kernel)),
                    ("strides", tuple(&pool.strides)),
                    ("padding", tuple(&pool.pads)),
                    ("ceil_mode", if pool.ceil { "True" } else { "False" }.into()),
                ];
                let entry = self.cvm.op(&name, "max_pool2d", &[x.entry], attrs, &shape);
                Ok(Q { entry, ..x })
            }
            Op::AvgPool(pool) => {
                // A depthwise convolution with weights 1, then a requantization by 1 / area.
                let x = self.input(id, 0)?;
                let channels = shape[1];
                let area = pool.kernel[0] * pool.kernel[1];
                let ones = vec![1; channels * area];
                let (w, _) = self.cvm.param(
                    &format!("{name}_ones"),
                    &[channels, 1, pool.kernel[0], pool.kernel[1]],
                    ones,
                );
                let attrs = vec![
                    ("channels", channels.to_string()),
                    ("kernel_size", tuple(&pool.kernel)),
                    ("strides", tuple(&pool.strides)),
                    ("padding", tuple(&pool.pads)),
                    ("groups", channels.to_string()),
                    ("use_bias", "False".into()),
                ];
                let sum = self.cvm.op(
                    &format!("{name}_sum"),
                    "conv2d",
                    &[x.entry, w],
                    attrs,
                    &shape,
                );
                // The weights 1 have precision 2.
                let precision = x.precision + 2 + bits(area as u64);
                self.mean(id, x, sum, precision, area, &name, &shape)
            }
            Op::Reduce(reduce) => {
                let x = self.input(id, 0)?;
                let input = self.shape(self.graph.values[id].inputs[0]).to_vec();
                let count: usize = reduce.axes.iter().map(|&a| input[a]).product();
                let attrs = vec![("axis", tuple(&reduce.axes)), ("keepdims", "True".into())];
                let precision = x.precision + bits(count as u64);
                // An exact sum stays so: a count of mask positions, or a sum mean pooling
                // divides (requantized after the division).
                let exact = x.scale == 1.0 && x.precision <= 2;
                let divided = !reduce.mean
                    && !self.consumers[id].is_empty()
                    && self.consumers[id].iter().all(|&c| {
                        matches!(self.graph.values[c].op, Op::DivCount)
                            && self.graph.values[c].inputs[0] == id
                            || matches!(self.graph.values[c].op, Op::Reshape)
                                && self.consumers[c].iter().all(|&d| {
                                    matches!(self.graph.values[d].op, Op::DivCount)
                                        && self.graph.values[d].inputs[0] == c
                                })
                    });
                if (exact || divided) && !reduce.mean && precision <= 32 {
                    let entry = self.cvm.op(&name, "sum", &[x.entry], attrs, &shape);
                    return Ok(Q {
                        entry,
                        precision,
                        ..x
                    });
                }
                let sum = self
                    .cvm
                    .op(&format!("{name}_sum"), "sum", &[x.entry], attrs, &shape);
                let divisor = if reduce.mean { count } else { 1 };
                self.mean(id, x, sum, precision, divisor, &name, &shape)
            }
            Op::DivCount => {
                // The sum, shifted left so that truncation loses under 2^−k of its unit,
                // divided by the count, then requantized.
                let sum = self.input(id, 0)?;
                let count = self.input(id, 1)?;
                let k = 30u32.saturating_sub(sum.precision).min(12);
                let (factor, factor_precision) =
                    self.cvm.param(&format!("{name}_unit"), &[1], vec![1 << k]);
                let sum_shape = self.shape(self.graph.values[id].inputs[0]).to_vec();
                let shifted = self.cvm.op(
                    &format!("{name}_shifted"),
                    "broadcast_mul",
                    &[sum.entry, factor],
                    Vec::new(),
                    &sum_shape,
                );
                let quotient = self.cvm.op(
                    &format!("{name}_quotient"),
                    "broadcast_div",
                    &[shifted, count.entry],
                    Vec::new(),
                    &shape,
                );
                let scale = sum.scale / pow2(k);
                let acc = Q {
                    entry: quotient,
                    scale,
                    precision: sum.precision + factor_precision,
                };
                let target = self.target_scale(id);
                let xmax = self.stats[id].max_abs / scale;
                self.requant(id, acc, xmax, &[scale / target], target, &name, &shape)
            }
            Op::Add => {
                let a = self.summand(id, 0)?;
                let b = self.summand(id, 1)?;
                self.add(id, a, b, false, &shape, &name)
            }
            Op::Sub => {
                let a = self.summand(id, 0)?;
                let b = self.summand(id, 1)?;
                self.add(id, a, b, true, &shape, &name)
            }
            Op::Slice(slice) => {
                let x = self.input(id, 0)?;
                let end: Vec<usize> = (0..shape.len())
                    .map(|a| slice.starts[a] + (shape[a] - 1) * slice.steps[a] + 1)
                    .collect();
                let attrs = vec![
                    ("begin", tuple(&slice.starts)),
                    ("end", tuple(&end)),
                    ("stride", tuple(&slice.steps)),
                ];
                let entry = self
                    .cvm
                    .op(&name, "strided_slice", &[x.entry], attrs, &shape);
                Ok(Q { entry, ..x })
            }
            Op::Mul => {
                let a = self.input(id, 0)?;
                let b = self.input(id, 1)?;
                let op = self.broadcast_op(id, "broadcast_mul");
                let product = self.cvm.op(
                    &format!("{name}_mul"),
                    op,
                    &[a.entry, b.entry],
                    Vec::new(),
                    &shape,
                );
                let scale = a.scale * b.scale;
                let acc = Q {
                    entry: product,
                    scale,
                    precision: a.precision + b.precision,
                };
                let target = self.target_scale(id);
                let xmax = self.stats[id].max_abs / scale;
                self.requant(id, acc, xmax, &[scale / target], target, &name, &shape)
            }
            Op::Flatten => {
                let x = self.input(id, 0)?;
                let entry = self
                    .cvm
                    .op(&name, "flatten", &[x.entry], Vec::new(), &shape);
                Ok(Q { entry, ..x })
            }
            Op::Reshape => {
                let x = self.input(id, 0)?;
                let attrs = vec![("shape", tuple(&shape))];
                let entry = self.cvm.op(&name, "reshape", &[x.entry], attrs, &shape);
                Ok(Q { entry, ..x })
            }
            Op::Transpose(perm) => {
                let x = self.input(id, 0)?;
                let attrs = vec![("axes", tuple(perm))];
                let entry = self.cvm.op(&name, "transpose", &[x.entry], attrs, &shape);
                Ok(Q { entry, ..x })
            }
            Op::Concat(axis) => {
                let inputs = self.graph.values[id].inputs.clone();
                let mut parts = Vec::new();
                for k in 0..inputs.len() {
                    parts.push(self.input(id, k)?);
                }
                let scale = parts.iter().map(|p| p.scale).fold(0.0f64, f64::max);
                let mut entries = Vec::new();
                let mut precision = 0;
                for (k, part) in parts.into_iter().enumerate() {
                    let part = if part.scale == scale && part.precision <= 8 {
                        part
                    } else {
                        let xmax = self.stats[inputs[k]].max_abs / part.scale;
                        let ratio = part.scale / scale;
                        {
                            let part_shape = self.shape(inputs[k]).to_vec();
                            self.requant(
                                id,
                                part,
                                xmax,
                                &[ratio],
                                scale,
                                &format!("{name}_in{k}"),
                                &part_shape,
                            )?
                        }
                    };
                    precision = precision.max(part.precision);
                    entries.push(part.entry);
                }
                let attrs = vec![("axis", axis.to_string())];
                let entry = self.cvm.op(&name, "concatenate", &entries, attrs, &shape);
                Ok(Q {
                    entry,
                    scale,
                    precision,
                })
            }
            Op::Table(f) => {
                let f = *f;
                let x = self.input(id, 0)?;
                if x.precision > 8 {
                    return Err(self.error(id, "a table lookup needs an int8 operand"));
                }
                let (offset, _) = self.cvm.param(&format!("{name}_offset"), &[1], vec![127]);
                let index = self.cvm.op(
                    &format!("{name}_index"),
                    "broadcast_add",
                    &[x.entry, offset],
                    Vec::new(),
                    &shape,
                );
                // A function within [−1, 1] has one output scale for every input; any other
                // gets its calibrated range.
                let scale = if f.bounded() {
                    1.0 / 127.0
                } else {
                    self.target_scale(id)
                };
                let table: Vec<i32> = (0..255)
                    .map(|i| {
                        round(function(f, f64::from(i - 127) * x.scale) / scale)
                            .clamp(-127.0, 127.0) as i32
                    })
                    .collect();
                let (table, precision) = self.cvm.param(&format!("{name}_table"), &[255], table);
                let attrs = vec![("in_dim", "255".into())];
                let entry = self
                    .cvm
                    .op(&name, "cvm_lut", &[index, table], attrs, &shape);
                Ok(Q {
                    entry,
                    scale,
                    precision,
                })
            }
        }
    }

    /// A sum of values of `x` (node `sum`, of precision `precision`) divided by `divisor` in
    /// its requantization (1 for a sum).
    #[allow(clippy::too_many_arguments)]
    fn mean(
        &mut self,
        id: usize,
        x: Q,
        sum: usize,
        precision: u32,
        divisor: usize,
        name: &str,
        shape: &[usize],
    ) -> Result<Q, ImportError> {
        let acc = Q {
            entry: sum,
            scale: x.scale,
            precision,
        };
        let target = self.target_scale(id);
        let ratio = x.scale / (divisor as f64 * target);
        let xmax = self.stats[id].max_abs * divisor as f64 / x.scale;
        self.requant(id, acc, xmax, &[ratio], target, name, shape)
    }

    fn broadcast_op(&self, id: usize, op: &'static str) -> &'static str {
        let inputs = &self.graph.values[id].inputs;
        let same = inputs.len() == 2 && self.shape(inputs[0]) == self.shape(inputs[1]);
        match (op, same) {
            ("broadcast_add", true) => "elemwise_add",
            _ => op,
        }
    }

    /// A conv2d or dense layer: int8 weights, an int32 bias at the accumulator's scale, the
    /// operator, then a requantization (none for the layer whose accumulator is the output).
    fn layer(
        &mut self,
        id: usize,
        layer: Layer<'_>,
        shape: &[usize],
        name: &str,
    ) -> Result<Q, ImportError> {
        let x = self.input(id, 0)?;
        if x.precision > 8 {
            return Err(self.error(
                id,
                format!("its data has precision {}, above 8", x.precision),
            ));
        }
        let Layer {
            weight,
            fixed_scales,
            bias,
            op,
            mut attrs,
        } = layer;
        let weight_shape = &weight.shape;
        let rows = weight_shape[0].max(1);
        let (weights, w_scales) = weights_at(
            &weight.data,
            rows,
            fixed_scales,
            self.per_channel,
            self.is_output(id),
        );
        let fan_in = weight.data.len() / rows;
        let use_bias = if bias.is_some() { "True" } else { "False" };
        attrs.push(("use_bias", use_bias.into()));
        let channels = weight_shape[0];
        let (w, w_precision) = self
            .cvm
            .param(&format!("{name}_weight"), weight_shape, weights);
        let mut inputs = vec![x.entry, w];
        let mut precision = x.precision + w_precision + bits(fan_in as u64);
        if let Some(bias) = bias {
            let mut values = Vec::with_capacity(channels);
            for (c, &b) in bias.iter().enumerate() {
                let v = round(b / (x.scale * w_scales[c]));
                if v.abs() >= f64::from(1u32 << 30) {
                    return Err(self.error(
                        id,
                        format!("the bias of channel {c} ({b}) is beyond int32 at the accumulator's scale"),
                    ));
                }
                values.push(v as i32);
            }
            let (b, b_precision) = self.cvm.param(&format!("{name}_bias"), &[channels], values);
            inputs.push(b);
            precision = precision.max(b_precision) + 1;
        }
        let entry = self.cvm.op(name, op, &inputs, attrs, shape);
        let acc_scales: Vec<f64> = w_scales.iter().map(|s| x.scale * s).collect();
        let acc = Q {
            entry,
            scale: acc_scales[0],
            precision,
        };
        if precision > 32 {
            return Err(self.error(
                id,
                format!("its accumulator needs precision {precision}, above 32"),
            ));
        }
        if self.is_output(id) {
            self.layers.push(LayerReport {
                node: self.graph.values[id].origin.clone(),
                cvm: self.cvm.name(entry).to_string(),
                input_scale: x.scale,
                weight_scales: RangeReport::of(&w_scales),
                accumulator_precision: precision,
                pre_shift: 0,
                factors: RangeReport::of(&[]),
                shift: 0,
                output_scale: acc.scale,
            });
            return Ok(acc);
        }
        let target = self.target_scale(id);
        let ratios: Vec<f64> = acc_scales.iter().map(|s| s / target).collect();
        let stats = &self.stats[id];
        let xmax = (0..channels)
            .map(|c| {
                stats
                    .channel_max_abs
                    .get(c)
                    .copied()
                    .unwrap_or(stats.max_abs)
                    / acc_scales[c]
            })
            .fold(0.0f64, f64::max);
        let before = self.layers.len();
        let out = self.requant(id, acc, xmax, &ratios, target, &format!("{name}_q"), shape)?;
        if let Some(report) = self.layers.get_mut(before) {
            report.input_scale = x.scale;
            report.weight_scales = RangeReport::of(&w_scales);
            report.cvm = self.cvm.name(entry).to_string();
        }
        Ok(out)
    }

    fn add(
        &mut self,
        id: usize,
        a: Q,
        b: Q,
        subtract: bool,
        shape: &[usize],
        name: &str,
    ) -> Result<Q, ImportError> {
        if a.precision > 16 || b.precision > 16 {
            return Err(self.error(id, "an operand of precision above 16"));
        }
        // A transformer's residual stream (a sum read only by layer normalizations and further
        // sums) stays int16, which the engine's layer_norm reads at any precision. There each
        // operand's factor takes every bit its product leaves within 31 (an int16 operand 14,
        // an int8 one 22), so that the smaller of two scale ratios keeps its precision; the
        // graphs the deployed runtime runs keep factors of 15 bits.
        let wide = self.wide(id);
        let (target, out_precision) = (self.target_scale(id), if wide { 16 } else { 8 });
        let limit = |q: Q| {
            if self.engine_only {
                pow2(30 - q.precision) - 1.0
            } else {
                MAX_FACTOR
            }
        };
        let (ra, rb) = (a.scale / target, b.scale / target);
        let n = factor_shift_within(ra, limit(a))
            .zip(factor_shift_within(rb, limit(b)))
            .map(|(na, nb)| na.min(nb))
            .ok_or_else(|| {
                self.error(
                    id,
                    format!(
                        "the scale ratio {} is too large for the sum's factors",
                        ra.max(rb)
                    ),
                )
            })?;
        let ma = round(ra * pow2(n)) as i32;
        let mb = round(rb * pow2(n)) as i32;
        // a − b: the second operand's factor negated, the same sum otherwise.
        let mb = if subtract { -mb } else { mb };
        let (fa, pa) = self.cvm.param(&format!("{name}_fa"), &[1], vec![ma]);
        let (fb, pb) = self.cvm.param(&format!("{name}_fb"), &[1], vec![mb]);
        let graph = self.graph;
        let operand = |k: usize| &graph.values[graph.values[id].inputs[k]].shape;
        let sa = self.cvm.op(
            &format!("{name}_a"),
            "broadcast_mul",
            &[a.entry, fa],
            Vec::new(),
            operand(0),
        );
        let sb = self.cvm.op(
            &format!("{name}_b"),
            "broadcast_mul",
            &[b.entry, fb],
            Vec::new(),
            operand(1),
        );
        let op = self.broadcast_op(id, "broadcast_add");
        let sum = self
            .cvm
            .op(&format!("{name}_sum"), op, &[sa, sb], Vec::new(), shape);
        let precision = (a.precision + pa).max(b.precision + pb) + 1;
        if precision > 32 {
            return Err(self.error(id, "the rescaled sum needs more than 32 bits"));
        }
        let attrs = vec![
            ("precision", out_precision.to_string()),
            ("shift_bit", n.to_string()),
        ];
        let entry = self.cvm.op(name, "cvm_right_shift", &[sum], attrs, shape);
        self.layers.push(LayerReport {
            node: self.graph.values[id].origin.clone(),
            cvm: self.cvm.name(entry).to_string(),
            input_scale: a.scale,
            weight_scales: RangeReport::of(&[b.scale]),
            accumulator_precision: precision,
            pre_shift: 0,
            factors: RangeReport::of(&[f64::from(ma), f64::from(mb)]),
            shift: n,
            output_scale: target,
        });
        Ok(Q {
            entry,
            scale: target,
            precision: out_precision,
        })
    }

    /// `acc` (calibrated |acc| up to `xmax`, in its integer units) times `ratios` (one, or one
    /// per channel on axis 1), rounded and clipped to int8 at scale `target`.
    #[allow(clippy::too_many_arguments)]
    fn requant(
        &mut self,
        id: usize,
        acc: Q,
        xmax: f64,
        ratios: &[f64],
        target: f64,
        name: &str,
        shape: &[usize],
    ) -> Result<Q, ImportError> {
        let mut x = acc;
        let mut pre_shift = 0u32;
        if x.precision > 16 {
            let needed = bits(xmax.ceil() as u64) + 1;
            pre_shift = needed.saturating_sub(16);
            let entry = if pre_shift == 0 {
                let attrs = vec![("precision", "16".into())];
                self.cvm
                    .op(&format!("{name}_16"), "cvm_clip", &[x.entry], attrs, shape)
            } else {
                let attrs = vec![
                    ("precision", "16".into()),
                    ("shift_bit", pre_shift.to_string()),
                ];
                self.cvm.op(
                    &format!("{name}_16"),
                    "cvm_right_shift",
                    &[x.entry],
                    attrs,
                    shape,
                )
            };
            x = Q {
                entry,
                scale: x.scale,
                precision: 16,
            };
        }
        let effective: Vec<f64> = ratios.iter().map(|r| r * pow2(pre_shift)).collect();
        let largest = effective.iter().copied().fold(0.0f64, f64::max);
        let n = factor_shift(largest).ok_or_else(|| {
            self.error(
                id,
                format!("the scale ratio {largest} is too large for a factor of 15 bits"),
            )
        })?;
        let factors: Vec<i32> = effective
            .iter()
            .map(|r| round(r * pow2(n)) as i32)
            .collect();
        let factor_shape: Vec<usize> = if factors.len() == 1 {
            vec![1]
        } else if shape.len() == 4 {
            vec![factors.len(), 1, 1]
        } else {
            vec![factors.len()]
        };
        let (f, f_precision) =
            self.cvm
                .param(&format!("{name}_factor"), &factor_shape, factors.clone());
        if x.precision + f_precision > 32 {
            return Err(self.error(id, "the requantization product needs more than 32 bits"));
        }
        let product = self.cvm.op(
            &format!("{name}_mul"),
            "broadcast_mul",
            &[x.entry, f],
            Vec::new(),
            shape,
        );
        let out_precision: u32 = if self.wide(id) { 16 } else { 8 };
        let attrs = vec![
            ("precision", out_precision.to_string()),
            ("shift_bit", n.to_string()),
        ];
        let entry = self
            .cvm
            .op(name, "cvm_right_shift", &[product], attrs, shape);
        let as_f64: Vec<f64> = factors.iter().map(|&m| f64::from(m)).collect();
        self.layers.push(LayerReport {
            node: self.graph.values[id].origin.clone(),
            cvm: self.cvm.name(entry).to_string(),
            input_scale: acc.scale,
            weight_scales: RangeReport::of(&[]),
            accumulator_precision: acc.precision,
            pre_shift,
            factors: RangeReport::of(&as_f64),
            shift: n,
            output_scale: target,
        });
        Ok(Q {
            entry,
            scale: target,
            precision: out_precision,
        })
    }
}

/// 2^n, exactly.
/// A real factor r > 0 as the engine's multiplier m in [1, 2^31 − 1] and shift s in [0, 62],
/// r ≈ m / 2^s, with the largest s that keeps m within 31 bits.
fn real_factor(r: f64) -> Option<(i64, u32)> {
    if !(r > 0.0 && r.is_finite()) {
        return None;
    }
    let limit = f64::from(i32::MAX);
    let shift = (0..=62u32).rev().find(|&s| round(r * pow2(s)) <= limit)?;
    let multiplier = round(r * pow2(shift));
    (multiplier >= 1.0).then_some((multiplier as i64, shift))
}

fn pow2(n: u32) -> f64 {
    f64::from_bits(u64::from(1023 + n.min(1000)) << 52)
}

/// The shift n in [1, 32] that gives the factor `round(ratio · 2^n)` the most bits within
/// 15, or `None` when even n = 1 exceeds them.
fn factor_shift(ratio: f64) -> Option<u32> {
    factor_shift_within(ratio, MAX_FACTOR)
}

/// [`factor_shift`] for factors of at most `max_factor`.
fn factor_shift_within(ratio: f64, max_factor: f64) -> Option<u32> {
    if ratio * 2.0 > max_factor {
        return None;
    }
    let mut n = 1;
    while n < 32 && ratio * pow2(n + 1) <= max_factor {
        n += 1;
    }
    Some(n)
}
