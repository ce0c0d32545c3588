//! Shared inputs of the criterion benches: the models they run (fixture models, and networks
//! built here in code with reproducible int8 weights), single-operator models for the kernel
//! benches, and the checks every bench makes before it times anything.
//!
//! The networks built here follow the CVM quantization pattern: every convolution and dense
//! layer takes 8-bit operands, and its wide accumulator is brought back to 8 bits by
//! `cvm_right_shift` with `precision` 8 (a rounding right shift, then a clip to ±127) before the
//! next one. Their weights are synthetic (`int8_values`), so their outputs mean nothing; their
//! shapes, operators, gas and work are those of the real networks.

pub mod gpt2;

use std::path::{Path, PathBuf};

use cvm_cli::HostError;
use cvm_cli::runner::encode_inputs;
use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Work;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::{Status, ValidatedModel};
use cvm_runtime::wasm::{WasmEngine, WasmSession};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A model ready to bench: canonical bytes and the inputs of one run, in declared order.
#[derive(Clone, Debug)]
pub struct BenchModel {
    /// Name used in bench ids (`<name>/wasm`, `<name>/native`).
    pub name: &'static str,
    /// Canonical model bytes.
    pub bytes: Vec<u8>,
    /// Inputs of one run.
    pub inputs: Vec<InputTensor>,
}

/// Canonical bytes of the README CNN fixture.
///
/// # Errors
/// If the fixture cannot be read or converted.
pub fn cnn_model() -> Result<Vec<u8>, HostError> {
    Ok(cvm_cli::load_model_file(&workspace().join("fixtures/models/cnn/model.json"))?.bytes)
}

/// The README CNN's input.
///
/// # Errors
/// If the fixture cannot be read.
pub fn cnn_input() -> Result<InputTensor, HostError> {
    cvm_cli::inputs::read_input(&workspace().join("fixtures/models/cnn/input.npy"))
}

/// The README CNN (`fixtures/models/cnn`) with its input.
///
/// # Errors
/// If a fixture file cannot be read or converted.
pub fn cnn() -> Result<BenchModel, HostError> {
    Ok(BenchModel {
        name: "cnn",
        bytes: cnn_model()?,
        inputs: vec![cnn_input()?],
    })
}

/// Canonical bytes of the realistic `generate_proposals_v2` fixture (N = 2, H = 54, W = 40,
/// A = 15, pre 2000, post 1000).
///
/// # Errors
/// If the fixture cannot be read or converted.
pub fn proposals_model() -> Result<Vec<u8>, HostError> {
    let path = workspace().join("fixtures/models/proposals/model.json");
    Ok(cvm_cli::load_model_file(&path)?.bytes)
}

/// The realistic proposals case's five inputs, in declared order.
///
/// # Errors
/// If a fixture file cannot be read.
pub fn proposals_inputs() -> Result<Vec<InputTensor>, HostError> {
    ["scores", "bbox_deltas", "im_shape", "anchors", "variances"]
        .iter()
        .map(|name| {
            let path = workspace().join(format!("fixtures/models/proposals/{name}.npy"));
            cvm_cli::inputs::read_input(&path)
        })
        .collect()
}

/// The realistic `generate_proposals_v2` case (`fixtures/models/proposals`).
///
/// # Errors
/// If a fixture file cannot be read or converted.
pub fn proposals() -> Result<BenchModel, HostError> {
    Ok(BenchModel {
        name: "proposals",
        bytes: proposals_model()?,
        inputs: proposals_inputs()?,
    })
}

/// The handwritten-digit CNN of `fixtures/models/digits`, imported from its CVM `symbol` and
/// `params` files, on the image of a 2 (`input_2.npy`).
///
/// # Errors
/// If a fixture file cannot be read, or the CVM import fails.
pub fn digits() -> Result<BenchModel, HostError> {
    let dir = workspace().join("fixtures/models/digits");
    let (symbol, params) = cvm_formats::cvm::read_dir(&dir)?;
    let imported = cvm_formats::cvm::import(&symbol, &params)
        .map_err(|error| HostError::input(format!("importing the digits model: {error}")))?;
    Ok(BenchModel {
        name: "digits",
        bytes: imported.model.encode(),
        inputs: vec![cvm_cli::inputs::read_input(&dir.join("input_2.npy"))?],
    })
}

/// `n` reproducible values in −127..=127 (xorshift; the same on every machine).
pub fn int8_values(n: usize, seed: u64) -> Vec<i32> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 255) as i32 - 127
        })
        .collect()
}

/// A value of a graph under construction: its reference and shape.
#[derive(Clone, Debug)]
pub struct Value {
    /// Where the value comes from.
    pub reference: ValueRef,
    /// Its shape.
    pub shape: Vec<u32>,
}

/// An attribute of a node being built.
pub fn attr(name: &str, value: AttrValue) -> Attr {
    Attr {
        name: name.into(),
        value,
    }
}

/// A pair attribute (`strides`, `padding`, `pool_size`, ...).
pub fn pair(name: &str, value: u32) -> Attr {
    attr(
        name,
        AttrValue::Ints(vec![i64::from(value), i64::from(value)]),
    )
}

/// Builds a model node by node, tracking shapes, with reproducible int8 parameters (each
/// parameter draws from its own seed, the order of creation).
#[derive(Debug)]
pub struct GraphBuilder {
    model: Model,
    next_seed: u64,
}

impl Default for GraphBuilder {
    fn default() -> GraphBuilder {
        GraphBuilder::new()
    }
}

impl GraphBuilder {
    /// An empty graph.
    pub fn new() -> GraphBuilder {
        GraphBuilder {
            model: Model {
                inputs: Vec::new(),
                params: Vec::new(),
                nodes: Vec::new(),
                outputs: Vec::new(),
            },
            next_seed: 1,
        }
    }

    /// Declares an input.
    pub fn input(&mut self, name: &str, shape: &[u32], precision: u8) -> Value {
        let index = self.model.inputs.len() as u32;
        self.model.inputs.push(InputDecl {
            name: name.into(),
            shape: shape.to_vec(),
            precision,
        });
        Value {
            reference: ValueRef::Input(index),
            shape: shape.to_vec(),
        }
    }

    /// Adds a parameter holding `values`.
    pub fn param(&mut self, name: &str, shape: &[u32], precision: u8, values: Vec<i32>) -> Value {
        let index = self.model.params.len() as u32;
        self.model.params.push(ParamDecl {
            name: name.into(),
            shape: shape.to_vec(),
            precision,
            data: ParamData::narrowest(values),
        });
        Value {
            reference: ValueRef::Param(index),
            shape: shape.to_vec(),
        }
    }

    /// Adds a parameter of reproducible int8 values (precision 8).
    pub fn int8_param(&mut self, name: &str, shape: &[u32]) -> Value {
        let n = shape.iter().map(|&d| d as usize).product();
        let seed = self.next_seed;
        self.next_seed += 1;
        self.param(name, shape, 8, int8_values(n, seed))
    }

    /// Adds a node of operator `op` whose (only) output has shape `shape`. Attributes may come
    /// in any order; they are sorted here as the canonical form requires.
    ///
    /// # Panics
    /// If `op` is not an operator name of the engine's table (a bug of the bench).
    #[allow(clippy::expect_used)] // operator names are constants of this crate
    pub fn node(
        &mut self,
        name: &str,
        op: &str,
        inputs: &[&Value],
        mut attrs: Vec<Attr>,
        shape: Vec<u32>,
    ) -> Value {
        attrs.sort_by(|a, b| a.name.cmp(&b.name));
        let index = self.model.nodes.len() as u32;
        self.model.nodes.push(Node {
            name: name.into(),
            op: cvm_engine::ops::by_name(op).expect("operator name").code,
            inputs: inputs.iter().map(|value| value.reference).collect(),
            attrs,
        });
        Value {
            reference: ValueRef::Node {
                node: index,
                output: 0,
            },
            shape,
        }
    }

    /// A square `kernel`×`kernel` convolution of NCHW `x` with `out_channels` filters, zero
    /// padding `kernel / 2`, stride `stride` and `groups` groups, with a bias; its output is
    /// requantized to 8 bits by `shift`. The bias is of the accumulator's scale: int8 values
    /// times 2^(shift − 3), at most ±16 after the shift, as a folded batch norm would give.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_requant(
        &mut self,
        name: &str,
        x: &Value,
        out_channels: u32,
        kernel: u32,
        stride: u32,
        groups: u32,
        shift: u32,
    ) -> Value {
        let conv = Conv {
            out_channels,
            kernel,
            stride,
            padding: kernel / 2,
            groups,
        };
        self.conv_requant_with(name, x, conv, shift)
    }

    /// [`GraphBuilder::conv_requant`] with any zero padding.
    pub fn conv_requant_with(&mut self, name: &str, x: &Value, conv: Conv, shift: u32) -> Value {
        let Conv {
            out_channels,
            kernel,
            stride,
            padding,
            groups,
        } = conv;
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
        let weight = self.int8_param(
            &format!("{name}_weight"),
            &[out_channels, c / groups, kernel, kernel],
        );
        let bias_scale = shift.saturating_sub(3);
        let seed = self.next_seed;
        self.next_seed += 1;
        let bias_values = int8_values(out_channels as usize, seed)
            .into_iter()
            .map(|v| v << bias_scale)
            .collect();
        let bias = self.param(
            &format!("{name}_bias"),
            &[out_channels],
            8 + bias_scale as u8,
            bias_values,
        );
        let out = |extent: u32| (extent + 2 * padding - kernel) / stride + 1;
        let conv = self.node(
            name,
            "conv2d",
            &[x, &weight, &bias],
            vec![
                attr("channels", AttrValue::Int(i64::from(out_channels))),
                attr("groups", AttrValue::Int(i64::from(groups))),
                pair("kernel_size", kernel),
                pair("padding", padding),
                pair("strides", stride),
            ],
            vec![n, out_channels, out(h), out(w)],
        );
        self.requantize(&format!("{name}_requant"), &conv, shift)
    }

    /// `cvm_right_shift` by `shift` with precision 8: round, then clip to ±127.
    pub fn requantize(&mut self, name: &str, x: &Value, shift: u32) -> Value {
        self.node(
            name,
            "cvm_right_shift",
            &[x],
            vec![
                attr("precision", AttrValue::Int(8)),
                attr("shift_bit", AttrValue::Int(i64::from(shift))),
            ],
            x.shape.clone(),
        )
    }

    /// `max_pool2d` of NCHW `x` over `window`×`window` windows, stride `stride`, padding
    /// `padding`.
    pub fn max_pool(
        &mut self,
        name: &str,
        x: &Value,
        window: u32,
        stride: u32,
        padding: u32,
    ) -> Value {
        let out = |extent: u32| (extent + 2 * padding - window) / stride + 1;
        let shape = vec![x.shape[0], x.shape[1], out(x.shape[2]), out(x.shape[3])];
        self.node(
            name,
            "max_pool2d",
            &[x],
            vec![
                pair("padding", padding),
                pair("pool_size", window),
                pair("strides", stride),
            ],
            shape,
        )
    }

    /// `flatten` of (N, …) `x` to (N, product of the rest).
    pub fn flatten(&mut self, name: &str, x: &Value) -> Value {
        let rest = x.shape[1..].iter().product();
        self.node(name, "flatten", &[x], vec![], vec![x.shape[0], rest])
    }

    /// `relu`.
    pub fn relu(&mut self, name: &str, x: &Value) -> Value {
        self.node(name, "relu", &[x], vec![], x.shape.clone())
    }

    /// `broadcast_add` of two values of the same shape.
    pub fn add(&mut self, name: &str, a: &Value, b: &Value) -> Value {
        self.node(name, "broadcast_add", &[a, b], vec![], a.shape.clone())
    }

    /// Global average pooling of NCHW `x` whose planes hold 2^`log2_area` elements: `sum` over
    /// H and W, then a right shift by `log2_area` (the mean, requantized to 8 bits).
    pub fn global_average(&mut self, name: &str, x: &Value, log2_area: u32) -> Value {
        let sum = self.node(
            name,
            "sum",
            &[x],
            vec![attr("axis", AttrValue::Ints(vec![2, 3]))],
            vec![x.shape[0], x.shape[1]],
        );
        self.requantize(&format!("{name}_mean"), &sum, log2_area)
    }

    /// `dense` of (M, K) `x` to `units` outputs, with int8 weights and a bias.
    pub fn dense(&mut self, name: &str, x: &Value, units: u32) -> Value {
        let depth = x.shape[1];
        let weight = self.int8_param(&format!("{name}_weight"), &[units, depth]);
        let bias = self.int8_param(&format!("{name}_bias"), &[units]);
        self.node(
            name,
            "dense",
            &[x, &weight, &bias],
            vec![attr("units", AttrValue::Int(i64::from(units)))],
            vec![x.shape[0], units],
        )
    }

    /// Declares `value` a model output.
    pub fn output(&mut self, name: &str, value: &Value) {
        self.model.outputs.push(OutputDecl {
            name: name.into(),
            value: value.reference,
        });
    }

    /// The model built so far.
    pub fn finish(self) -> Model {
        self.model
    }
}

/// The geometry of a convolution for [`GraphBuilder::conv_requant_with`].
#[derive(Clone, Copy, Debug)]
pub struct Conv {
    /// Filters.
    pub out_channels: u32,
    /// Square kernel side.
    pub kernel: u32,
    /// Stride on both axes.
    pub stride: u32,
    /// Zero padding on every side.
    pub padding: u32,
    /// Groups (the input channels for a depthwise convolution).
    pub groups: u32,
}

/// The right shift that brings a convolution's accumulator back to 8 bits, for a fan-in of
/// `fan_in` = IC·KH·KW products of int8 weights (uniform, standard deviation ≈ 74) with
/// post-`relu` 8-bit activations (root mean square ≈ 28). The accumulator's standard
/// deviation is then ≈ 2,060·√fan_in; the shift brings it to ≈ 40, so that a clip at ±127 cuts
/// about three standard deviations out: round(log2(51.5·√fan_in)) = ⌊log2(2·2652·fan_in)⌋ / 2.
pub fn requant_shift(fan_in: u32) -> u32 {
    (2 * 2652 * u64::from(fan_in)).ilog2() / 2
}

/// A reproducible int8 image batch of `shape` (seed 7).
fn int8_input(shape: &[u32]) -> InputTensor {
    let n = shape.iter().map(|&d| d as usize).product();
    InputTensor {
        shape: shape.to_vec(),
        data: int8_values(n, 7),
    }
}

/// A basic residual block of ResNet: two 3×3 convolutions (the first of stride `stride`), each
/// requantized, `relu` between them; a 1×1 projection of stride 2 for the shortcut when the block
/// downsamples; the sum requantized (shift 1) and rectified.
fn basic_block(
    graph: &mut GraphBuilder,
    name: &str,
    x: &Value,
    channels: u32,
    stride: u32,
) -> Value {
    let in_channels = x.shape[1];
    let conv1 = graph.conv_requant(
        &format!("{name}_conv1"),
        x,
        channels,
        3,
        stride,
        1,
        requant_shift(in_channels * 9),
    );
    let relu1 = graph.relu(&format!("{name}_relu1"), &conv1);
    let conv2 = graph.conv_requant(
        &format!("{name}_conv2"),
        &relu1,
        channels,
        3,
        1,
        1,
        requant_shift(channels * 9),
    );
    let shortcut = if stride == 1 {
        x.clone()
    } else {
        graph.conv_requant(
            &format!("{name}_project"),
            x,
            channels,
            1,
            2,
            1,
            requant_shift(in_channels),
        )
    };
    let sum = graph.add(&format!("{name}_add"), &conv2, &shortcut);
    let requantized = graph.requantize(&format!("{name}_add_requant"), &sum, 1);
    graph.relu(&format!("{name}_relu2"), &requantized)
}

/// Stages of basic blocks: `blocks` per stage, at the channel counts `stages`; every stage but
/// the first starts with a stride-2 block.
fn residual_stages(graph: &mut GraphBuilder, mut x: Value, stages: &[u32], blocks: usize) -> Value {
    for (stage, &channels) in stages.iter().enumerate() {
        for block in 0..blocks {
            let name = format!("stage{}_block{}", stage + 1, block + 1);
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            x = basic_block(graph, &name, &x, channels, stride);
        }
    }
    x
}

/// A ResNet-20 for CIFAR-10, quantized to CVM form: input 1×3×32×32 (int8); a 3×3 stem to 16
/// channels; three stages of three basic blocks (16, 32, 64 channels; the first block of stages
/// 2 and 3 has stride 2 and a 1×1 stride-2 projection shortcut); residual sums by
/// `broadcast_add`, requantized (shift 1) and rectified; global average pooling (`sum` over H
/// and W, shift 6); `dense` 64 → 10. 19 convolutions, ~41 M multiply-accumulates.
pub fn resnet20() -> BenchModel {
    let mut graph = GraphBuilder::new();
    let data = graph.input("data", &[1, 3, 32, 32], 8);
    // The stem's input is the raw image (rms ≈ 73, not ≈ 28): one bit more of shift.
    let stem = graph.conv_requant("stem", &data, 16, 3, 1, 1, requant_shift(27) + 1);
    let x = graph.relu("stem_relu", &stem);
    let x = residual_stages(&mut graph, x, &[16, 32, 64], 3);
    let pooled = graph.global_average("pool", &x, 6);
    let logits = graph.dense("fc", &pooled, 10);
    graph.output("logits", &logits);
    BenchModel {
        name: "resnet20",
        bytes: graph.finish().encode(),
        inputs: vec![int8_input(&[1, 3, 32, 32])],
    }
}

/// A ResNet-18 for ImageNet, quantized to CVM form: input 1×3×224×224 (int8); a 7×7 stride-2
/// stem to 64 channels and a 3×3 stride-2 max pooling (56×56); four stages of two basic blocks
/// (64, 128, 256, 512 channels, down to 7×7); global average pooling (`sum` over the 49
/// positions, shift 6); `dense` 512 → 1000. 20 convolutions, ~1.8 G multiply-accumulates.
pub fn resnet18() -> BenchModel {
    let mut graph = GraphBuilder::new();
    let data = graph.input("data", &[1, 3, 224, 224], 8);
    let stem = graph.conv_requant("stem", &data, 64, 7, 2, 1, requant_shift(147) + 1);
    let stem = graph.relu("stem_relu", &stem);
    let x = graph.max_pool("stem_pool", &stem, 3, 2, 1);
    let x = residual_stages(&mut graph, x, &[64, 128, 256, 512], 2);
    let pooled = graph.global_average("pool", &x, 6);
    let logits = graph.dense("fc", &pooled, 1000);
    graph.output("logits", &logits);
    BenchModel {
        name: "resnet18",
        bytes: graph.finish().encode(),
        inputs: vec![int8_input(&[1, 3, 224, 224])],
    }
}

/// MobileNet-v1 at width 0.5, quantized to CVM form: input 1×3×128×128 (int8); a 3×3 stride-2
/// stem to 16 channels; thirteen depthwise-separable blocks (3×3 depthwise convolution with
/// groups = channels, requantize, `relu`, 1×1 pointwise convolution, requantize, `relu`), five
/// of them with stride 2, channels 32, 64, 64, 128, 128, 256 × 6, 512, 512 on planes of 64 down
/// to 4; global average pooling; `dense` 512 → 1000. ~49 M multiply-accumulates.
pub fn mobilenet_v1() -> BenchModel {
    let mut graph = GraphBuilder::new();
    let data = graph.input("data", &[1, 3, 128, 128], 8);
    let stem = graph.conv_requant("stem", &data, 16, 3, 2, 1, requant_shift(27) + 1);
    let mut x = graph.relu("stem_relu", &stem);
    let blocks: [(u32, u32); 13] = [
        (32, 1),
        (64, 2),
        (64, 1),
        (128, 2),
        (128, 1),
        (256, 2),
        (256, 1),
        (256, 1),
        (256, 1),
        (256, 1),
        (256, 1),
        (512, 2),
        (512, 1),
    ];
    for (index, &(out_channels, stride)) in blocks.iter().enumerate() {
        let name = format!("block{}", index + 1);
        let channels = x.shape[1];
        let depthwise = graph.conv_requant(
            &format!("{name}_dw"),
            &x,
            channels,
            3,
            stride,
            channels,
            requant_shift(9),
        );
        let depthwise = graph.relu(&format!("{name}_dw_relu"), &depthwise);
        let pointwise = graph.conv_requant(
            &format!("{name}_pw"),
            &depthwise,
            out_channels,
            1,
            1,
            1,
            requant_shift(channels),
        );
        x = graph.relu(&format!("{name}_pw_relu"), &pointwise);
    }
    let pooled = graph.global_average("pool", &x, 4);
    let logits = graph.dense("fc", &pooled, 1000);
    graph.output("logits", &logits);
    BenchModel {
        name: "mobilenet_v1",
        bytes: graph.finish().encode(),
        inputs: vec![int8_input(&[1, 3, 128, 128])],
    }
}

/// LeNet-5 on 28×28 digits, quantized to CVM form: input 1×1×28×28 (int8); a 5×5 convolution to
/// 6 channels (padding 2), `relu`, 2×2 max pooling; a 5×5 convolution to 16 channels (no
/// padding), `relu`, 2×2 max pooling; `flatten` (400); `dense` 120 and 84, each requantized and
/// rectified; `dense` 10. ~0.42 M multiply-accumulates.
pub fn lenet5() -> BenchModel {
    let mut graph = GraphBuilder::new();
    let data = graph.input("data", &[1, 1, 28, 28], 8);
    let conv = |out_channels, padding| Conv {
        out_channels,
        kernel: 5,
        stride: 1,
        padding,
        groups: 1,
    };
    let conv1 = graph.conv_requant_with("conv1", &data, conv(6, 2), requant_shift(25) + 1);
    let conv1 = graph.relu("conv1_relu", &conv1);
    let pool1 = graph.max_pool("pool1", &conv1, 2, 2, 0);
    let conv2 = graph.conv_requant_with("conv2", &pool1, conv(16, 0), requant_shift(150));
    let conv2 = graph.relu("conv2_relu", &conv2);
    let pool2 = graph.max_pool("pool2", &conv2, 2, 2, 0);
    let mut x = graph.flatten("flatten", &pool2);
    for (name, units) in [("fc1", 120), ("fc2", 84)] {
        let shift = requant_shift(x.shape[1]);
        let dense = graph.dense(name, &x, units);
        let dense = graph.requantize(&format!("{name}_requant"), &dense, shift);
        x = graph.relu(&format!("{name}_relu"), &dense);
    }
    let logits = graph.dense("fc3", &x, 10);
    graph.output("logits", &logits);
    BenchModel {
        name: "lenet5",
        bytes: graph.finish().encode(),
        inputs: vec![int8_input(&[1, 1, 28, 28])],
    }
}

/// `count` chained `relu` nodes over one 1×64×56×56 int8 input (precision 8), named
/// `relu_x<count>`: a model whose work is negligible beside the per-run cost that grows with the
/// tensors' size (moving the input in, the output out, the arena). Named `relu_x1` and
/// `relu_x20` for the counts the benches use, `relu_chain` otherwise.
///
/// # Panics
/// If `count` is 0.
pub fn relu_chain(count: usize) -> BenchModel {
    assert!(count > 0, "at least one relu");
    let shape = [1, 64, 56, 56];
    let mut graph = GraphBuilder::new();
    let mut x = graph.input("data", &shape, 8);
    for i in 0..count {
        x = graph.relu(&format!("relu{i}"), &x);
    }
    graph.output("out", &x);
    BenchModel {
        name: match count {
            1 => "relu_x1",
            20 => "relu_x20",
            _ => "relu_chain",
        },
        bytes: graph.finish().encode(),
        inputs: vec![int8_input(&shape)],
    }
}

/// Multiply-accumulates of one run as a network's size is quoted: one per weight element a
/// `conv2d` or `dense` output reads (output elements × weight elements ÷ output channels).
pub fn network_macs(model: &ValidatedModel) -> u64 {
    model
        .nodes
        .iter()
        .filter(|node| matches!(node.op.name, "conv2d" | "dense"))
        .map(|node| {
            let outputs = node.output_types[0].shape.elements();
            let weight = model.value_types[node.inputs[1]].shape.dims();
            let per_output: u64 = weight.iter().skip(1).map(|&d| u64::from(d)).product();
            outputs * per_output
        })
        .sum()
}

/// Multiply-accumulates of one run as the gas schedule counts them: every node's `macs`
/// (conv2d, dense, CINN `Dot`; 8-bit reductions rounded up to the vector width).
pub fn multiply_accumulates(model: &ValidatedModel) -> u64 {
    work(model, |work| work.macs)
}

/// The total of one count of every node's work (before pricing).
pub fn work(model: &ValidatedModel, count: fn(&Work) -> u64) -> u64 {
    model
        .nodes
        .iter()
        .map(|node| model.usage_of(node).map_or(0, |usage| count(&usage.work)))
        .sum()
}

/// What a bench checked of its model before timing it.
#[derive(Debug)]
pub struct Checked {
    /// The validated model.
    pub model: ValidatedModel,
    /// Gas of one run.
    pub gas: u64,
    /// Multiply-accumulates of one run, as the gas schedule counts them.
    pub macs: u64,
    /// Multiply-accumulates of one run, as a network's size is quoted ([`network_macs`]).
    pub network_macs: u64,
    /// The native run's report.
    pub report: cvm_engine::Report,
}

/// Loads `bench` natively and runs it once; fails unless the run succeeds and charges the
/// model's static gas.
///
/// # Errors
/// A message naming the model and what went wrong.
pub fn check(bench: &BenchModel) -> Result<Checked, String> {
    let model = cvm_engine::load(&bench.bytes, 1)
        .map_err(|report| format!("{}: the model does not load: {report:?}", bench.name))?;
    let report = cvm_engine::run(&model, bench.inputs.clone(), u64::MAX);
    if !matches!(report.outcome.status, Status::Ok { .. }) {
        return Err(format!("{}: the run failed: {report:?}", bench.name));
    }
    if report.outcome.gas_used != model.total_gas {
        return Err(format!(
            "{}: the run charged {} gas, the estimate is {}",
            bench.name, report.outcome.gas_used, model.total_gas
        ));
    }
    Ok(Checked {
        gas: model.total_gas,
        macs: multiply_accumulates(&model),
        network_macs: network_macs(&model),
        model,
        report,
    })
}

/// A session of `engine` with `bench`'s model loaded, after one run whose report must equal the
/// native one of [`check`].
///
/// # Errors
/// A message naming the model: a wasm failure, a rejected model, or reports that differ.
pub fn loaded_session(
    engine: &WasmEngine,
    bench: &BenchModel,
    checked: &Checked,
) -> Result<WasmSession, String> {
    let name = bench.name;
    let mut session = engine.session().map_err(|e| format!("{name}: {e}"))?;
    if let Some(report) = session
        .load(&bench.bytes, 1)
        .map_err(|e| format!("{name}: {e}"))?
    {
        return Err(format!("{name}: engine.wasm rejects the model: {report:?}"));
    }
    let report = session
        .run(&encode_inputs(&bench.inputs), u64::MAX)
        .map_err(|e| format!("{name}: {e}"))?;
    if report != checked.report {
        return Err(format!(
            "{name}: the wasm report differs from the native one: {report:?}"
        ));
    }
    Ok(session)
}
