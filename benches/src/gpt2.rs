//! A GPT-2-small-shaped causal language model, written as the ONNX file PyTorch's
//! torch.export-based exporter writes for such a model, with random weights from a seed; and
//! its import, for the `gpt2` bench.
//!
//! The graph is the character model's of `fixtures/onnx/charlm` at GPT-2 small's sizes: token
//! ids (1, T) int64; a `Gather` of the token table plus a constant positional embedding; per
//! block a pre-norm `LayerNormalization`, the queries, keys and values as `MatMul` and bias
//! `Add`, the heads by `Reshape` and `Transpose`, `MatMul` of the queries by the keys, `Mul` by
//! 1/√d, the causal mask as `Where(mask, −∞, scores)` on a boolean constant, `Softmax`,
//! `MatMul` by the values, the heads joined, the output projection, the residual `Add`; a
//! second `LayerNormalization`, an MLP of `Gelu` (opset 20), the residual `Add`; a final
//! `LayerNormalization` and the head, a `MatMul` by the token table transposed (GPT-2 ties
//! them): logits (1, T, V). Weights are drawn N(0, 0.02) as GPT-2 initializes them (an
//! Irwin–Hall sum of four uniforms from splitmix64), layer norms are γ = 1 and β = 0, biases 0.
//! Every tensor over 1 KiB is external data (`model.onnx.data`), as the exporter writes a model
//! beyond protobuf's 2 GiB and as any model of this size must be for `cvm_onnx`'s 256 MiB file
//! bound.
#![allow(clippy::float_arithmetic)] // the float model's weights

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use cvm_onnx::proto::tensor_proto::DataLocation;
use cvm_onnx::proto::tensor_shape_proto::{Dimension, dimension};
use cvm_onnx::proto::type_proto::{Tensor as TensorType, Value as TypeValue};
use cvm_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto, attribute_proto::AttributeType,
};
use prost::Message;

/// The sizes of a GPT-style model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gpt2Shape {
    /// Transformer blocks.
    pub blocks: usize,
    /// Width of the residual stream.
    pub width: usize,
    /// Attention heads (dividing `width`).
    pub heads: usize,
    /// Width of the MLP.
    pub mlp: usize,
    /// Rows of the token table.
    pub vocabulary: usize,
    /// Tokens of one forward pass.
    pub context: usize,
}

/// GPT-2 small: 12 blocks of width 768, 12 heads, MLP 3,072, vocabulary 50,257, run here over
/// a context of 128 tokens.
pub const GPT2_SMALL: Gpt2Shape = Gpt2Shape {
    blocks: 12,
    width: 768,
    heads: 12,
    mlp: 3072,
    vocabulary: 50_257,
    context: 128,
};

impl Gpt2Shape {
    /// Multiply-accumulates of one forward pass: the projections, the attention products and
    /// the head.
    pub fn macs(&self) -> u64 {
        let (t, d, m) = (self.context as u64, self.width as u64, self.mlp as u64);
        let block = 4 * t * d * d + 2 * t * d * m + 2 * t * t * d;
        self.blocks as u64 * block + t * d * self.vocabulary as u64
    }
}

const FLOAT: i32 = 1;
const INT64: i32 = 7;
const BOOL: i32 = 9;
/// The external data file, beside the model.
const DATA_FILE: &str = "model.onnx.data";
/// Tensors above this many bytes go to the external data file.
const INLINE_BYTES: usize = 1024;

/// splitmix64: the seeded stream the weights are drawn from.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Approximately N(0, std²): the sum of four uniforms, centred (variance 1/3), scaled.
    fn normal(&mut self, std: f64) -> f32 {
        let sum: f64 = (0..4).map(|_| self.uniform()).sum();
        ((sum - 2.0) * 3f64.sqrt() * std) as f32
    }
}

/// Builds the graph, writing large tensors to the data file as it goes.
struct Writer {
    data: BufWriter<File>,
    offset: u64,
    initializers: Vec<TensorProto>,
    nodes: Vec<NodeProto>,
    rng: Rng,
}

impl Writer {
    fn tensor(&mut self, name: &str, data_type: i32, dims: &[usize], bytes: Vec<u8>) -> String {
        let mut tensor = TensorProto {
            name: Some(name.into()),
            data_type: Some(data_type),
            dims: dims.iter().map(|&d| d as i64).collect(),
            ..Default::default()
        };
        if bytes.len() > INLINE_BYTES {
            let entry = |key: &str, value: String| StringStringEntryProto {
                key: Some(key.into()),
                value: Some(value),
            };
            tensor.data_location = Some(DataLocation::External as i32);
            tensor.external_data = vec![
                entry("location", DATA_FILE.into()),
                entry("offset", self.offset.to_string()),
                entry("length", bytes.len().to_string()),
            ];
            self.offset += bytes.len() as u64;
            // A failed write shows when the file is flushed in `write_onnx`.
            let _ = self.data.write_all(&bytes);
        } else {
            tensor.raw_data = Some(bytes);
        }
        self.initializers.push(tensor);
        name.into()
    }

    fn floats(&mut self, name: &str, dims: &[usize], values: &[f32]) -> String {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, FLOAT, dims, bytes)
    }

    fn random(&mut self, name: &str, dims: &[usize]) -> String {
        let n: usize = dims.iter().product();
        let values: Vec<f32> = (0..n).map(|_| self.rng.normal(0.02)).collect();
        self.floats(name, dims, &values)
    }

    fn filled(&mut self, name: &str, dims: &[usize], value: f32) -> String {
        let n: usize = dims.iter().product();
        self.floats(name, dims, &vec![value; n])
    }

    fn int64s(&mut self, name: &str, values: &[i64]) -> String {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, INT64, &[values.len()], bytes)
    }

    fn node(&mut self, op: &str, inputs: &[&str], output: &str, attributes: Vec<AttributeProto>) {
        self.nodes.push(NodeProto {
            op_type: Some(op.into()),
            name: Some(format!("{op}_{}", self.nodes.len())),
            input: inputs.iter().map(|&s| s.to_string()).collect(),
            output: vec![output.into()],
            attribute: attributes,
            ..Default::default()
        });
    }

    /// `x · W + b`, as the exporter writes `nn.Linear`.
    fn linear(&mut self, name: &str, x: &str, inputs: usize, outputs: usize) -> String {
        let w = self.random(&format!("{name}.weight"), &[inputs, outputs]);
        let b = self.filled(&format!("{name}.bias"), &[outputs], 0.0);
        let product = format!("{name}_matmul");
        self.node("MatMul", &[x, &w], &product, Vec::new());
        self.node("Add", &[&product, &b], name, Vec::new());
        name.into()
    }

    fn layer_norm(&mut self, name: &str, x: &str, width: usize) -> String {
        let g = self.filled(&format!("{name}.weight"), &[width], 1.0);
        let b = self.filled(&format!("{name}.bias"), &[width], 0.0);
        let attributes = vec![float_attribute("epsilon", 1e-5), int_attribute("axis", -1)];
        self.node("LayerNormalization", &[x, &g, &b], name, attributes);
        name.into()
    }
}

fn int_attribute(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(value),
        ..Default::default()
    }
}

fn float_attribute(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(value),
        ..Default::default()
    }
}

fn ints_attribute(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    }
}

fn value_info(name: &str, elem_type: i32, dims: &[usize]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(dimension::Value::DimValue(d as i64)),
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(TensorType {
                elem_type: Some(elem_type),
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
    }
}

/// Writes `model.onnx` and `model.onnx.data` of `shape`, weights from `seed`, into `dir`
/// (created when missing); returns the model's path.
///
/// # Errors
/// A file that cannot be written.
pub fn write_onnx(shape: &Gpt2Shape, seed: u64, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let Gpt2Shape {
        blocks,
        width: d,
        heads,
        mlp,
        vocabulary,
        context: t,
    } = *shape;
    let mut w = Writer {
        data: BufWriter::new(File::create(dir.join(DATA_FILE))?),
        offset: 0,
        initializers: Vec::new(),
        nodes: Vec::new(),
        rng: Rng(seed),
    };
    let table: Vec<f32> = (0..vocabulary * d).map(|_| w.rng.normal(0.02)).collect();
    let wte = w.floats("wte", &[vocabulary, d], &table);
    let wpe = w.random("wpe", &[1, t, d]);
    let split = w.int64s(
        "heads_shape",
        &[1, t as i64, heads as i64, (d / heads) as i64],
    );
    let joined = w.int64s("joined_shape", &[1, t as i64, d as i64]);
    let scale = w.floats("scale", &[], &[1.0 / ((d / heads) as f32).sqrt()]);
    let minus_infinity = w.floats("minus_infinity", &[], &[f32::NEG_INFINITY]);
    let future: Vec<u8> = (0..t * t).map(|k| u8::from(k % t > k / t)).collect();
    let mask = w.tensor("future", BOOL, &[t, t], future);

    w.node(
        "Gather",
        &[&wte, "ids"],
        "tokens",
        vec![int_attribute("axis", 0)],
    );
    w.node("Add", &["tokens", &wpe], "x0", Vec::new());
    let mut x = "x0".to_string();
    for b in 0..blocks {
        let p = format!("h{b}");
        let h = w.layer_norm(&format!("{p}.ln_1"), &x, d);
        let mut qkv = Vec::new();
        for (part, perm) in [
            ("q", [0, 2, 1, 3]),
            ("k", [0, 2, 3, 1]),
            ("v", [0, 2, 1, 3]),
        ] {
            let projected = w.linear(&format!("{p}.attn.{part}"), &h, d, d);
            let split_name = format!("{p}.attn.{part}_heads");
            w.node("Reshape", &[&projected, &split], &split_name, Vec::new());
            let moved = format!("{p}.attn.{part}_t");
            w.node(
                "Transpose",
                &[&split_name],
                &moved,
                vec![ints_attribute("perm", &perm)],
            );
            qkv.push(moved);
        }
        let scores = format!("{p}.attn.scores");
        w.node("MatMul", &[&qkv[0], &qkv[1]], &scores, Vec::new());
        let scaled = format!("{p}.attn.scaled");
        w.node("Mul", &[&scores, &scale], &scaled, Vec::new());
        let masked = format!("{p}.attn.masked");
        w.node(
            "Where",
            &[&mask, &minus_infinity, &scaled],
            &masked,
            Vec::new(),
        );
        let probabilities = format!("{p}.attn.probabilities");
        let axis = vec![int_attribute("axis", -1)];
        w.node("Softmax", &[&masked], &probabilities, axis);
        let context = format!("{p}.attn.context");
        w.node("MatMul", &[&probabilities, &qkv[2]], &context, Vec::new());
        let moved = format!("{p}.attn.context_t");
        let perm = vec![ints_attribute("perm", &[0, 2, 1, 3])];
        w.node("Transpose", &[&context], &moved, perm);
        let merged = format!("{p}.attn.merged");
        w.node("Reshape", &[&moved, &joined], &merged, Vec::new());
        let projected = w.linear(&format!("{p}.attn.c_proj"), &merged, d, d);
        let after_attention = format!("{p}.residual_1");
        w.node("Add", &[&x, &projected], &after_attention, Vec::new());
        let h = w.layer_norm(&format!("{p}.ln_2"), &after_attention, d);
        let up = w.linear(&format!("{p}.mlp.c_fc"), &h, d, mlp);
        let activated = format!("{p}.mlp.gelu");
        w.node("Gelu", &[&up], &activated, Vec::new());
        let down = w.linear(&format!("{p}.mlp.c_proj"), &activated, mlp, d);
        let out = format!("{p}.residual_2");
        w.node("Add", &[&after_attention, &down], &out, Vec::new());
        x = out;
    }
    let h = w.layer_norm("ln_f", &x, d);
    let mut transposed = vec![0f32; vocabulary * d];
    for (v, row) in table.chunks(d).enumerate() {
        for (k, &value) in row.iter().enumerate() {
            transposed[k * vocabulary + v] = value;
        }
    }
    let head = w.floats("lm_head", &[d, vocabulary], &transposed);
    w.node("MatMul", &[&h, &head], "logits", Vec::new());
    w.data.flush()?;

    let model = ModelProto {
        ir_version: Some(9),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(20),
        }],
        producer_name: Some("cvm-benches gpt2".into()),
        graph: Some(GraphProto {
            name: Some("gpt2".into()),
            node: w.nodes,
            initializer: w.initializers,
            input: vec![value_info("ids", INT64, &[1, t])],
            output: vec![value_info("logits", FLOAT, &[1, t, vocabulary])],
            ..Default::default()
        }),
        ..Default::default()
    };
    let path = dir.join("model.onnx");
    std::fs::write(&path, model.encode_to_vec())?;
    Ok(path)
}

/// Token windows of `count` × `context` ids over the vocabulary, from `seed`.
pub fn windows(shape: &Gpt2Shape, count: usize, seed: u64) -> Vec<i32> {
    let mut rng = Rng(seed);
    (0..count * shape.context)
        .map(|_| (rng.next() % shape.vocabulary as u64) as i32)
        .collect()
}

/// Calibration windows of the bench's import.
const CALIBRATION_WINDOWS: usize = 2;

/// The bench model of `shape`: the ONNX model of seed 1 written into `dir`, imported with no
/// option (calibrated on two seeded windows), and one seeded window of ids as its input. The
/// import's results are kept in `dir` (`model.cvm`, and `ids.npy` for
/// `benches/gpt2_onnxruntime.py`), and reused while `model.cvm` is there.
///
/// # Errors
/// A file that cannot be written or read, or an import that fails, as a message.
pub fn bench_model(shape: &Gpt2Shape, dir: &Path) -> Result<crate::BenchModel, String> {
    let ids = windows(shape, 1, 3);
    let window = cvm_formats::npy::NpyArray {
        shape: vec![1, shape.context as u32],
        data: ids.clone(),
    };
    let canonical = dir.join("model.cvm");
    if !canonical.exists() {
        let path = write_onnx(shape, 1, dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let model = cvm_onnx::read_file(&path).map_err(|e| e.to_string())?;
        let importer = cvm_onnx::import::Importer::new(&model).map_err(|e| e.to_string())?;
        let calibration = cvm_formats::npy::NpyF32Array {
            shape: vec![CALIBRATION_WINDOWS as u32, shape.context as u32],
            data: windows(shape, CALIBRATION_WINDOWS, 2)
                .iter()
                .map(|&id| id as f32)
                .collect(),
        };
        let calibration = importer
            .calibrate(&calibration, &mut |_, _| {})
            .map_err(|e| e.to_string())?;
        let imported = importer
            .quantize(&calibration, cvm_onnx::import::Options::default())
            .map_err(|e| e.to_string())?;
        std::fs::write(dir.join("ids.npy"), cvm_formats::npy::write_npy(&window))
            .and_then(|()| std::fs::write(&canonical, &imported.canonical))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let bytes = std::fs::read(&canonical).map_err(|e| format!("{}: {e}", canonical.display()))?;
    Ok(crate::BenchModel {
        name: "gpt2_small",
        bytes,
        inputs: vec![cvm_engine::exec::InputTensor {
            shape: window.shape,
            data: ids,
        }],
    })
}
