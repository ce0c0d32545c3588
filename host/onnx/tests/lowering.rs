//! The forms exporters write, lowered with ONNX's meaning: an open batch axis and the shape
//! plumbing around it, reductions, slices and splits, subtraction, division and n-ary sums,
//! uneven padding, and the tabled activations. Each model is built here with the prost types;
//! its float evaluation is compared with the formula written out in the test, and its integer
//! model with the float one. They also seed the ONNX import fuzz target (`check`).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly
#![allow(clippy::float_arithmetic)] // expected float outputs

mod common;

use common::*;
use cvm_formats::npy::NpyF32Array;
use cvm_onnx::import::{Importer, InputShape, Options};
use cvm_onnx::proto::{GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use prost::Message;

fn graph(
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    input: ValueInfoProto,
    opset_version: i64,
) -> ModelProto {
    let mut model = model(GraphProto {
        name: Some("g".into()),
        node: nodes,
        initializer: initializers,
        input: vec![input],
        output: vec![value_info("y", FLOAT, &[Dim::Param("batch")])],
        ..Default::default()
    });
    model.opset_import = vec![opset("", opset_version)];
    model
}

/// Deterministic inputs in about [−2, 2).
fn samples(count: usize, size: usize) -> NpyF32Array {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let data = (0..count * size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        })
        .collect();
    NpyF32Array {
        shape: vec![count as u32, size as u32],
        data,
    }
}

fn shaped(mut batch: NpyF32Array, shape: &[u32]) -> NpyF32Array {
    batch.shape = [&[batch.shape[0]][..], shape].concat();
    batch
}

/// Imports `model` and checks, on every sample, its float evaluation against `reference`
/// (within 1e-9) and its integer model against the float one (within `tolerance` times the
/// largest |float output|). Returns the importer's notes. With `CVM_WRITE_FUZZ_CORPUS=<dir>`
/// (scripts/fuzz.sh) the model is also written into `<dir>/onnx_import/`, so that the fuzzer
/// starts from every form these tests build.
fn check(
    model: &ModelProto,
    batch: &NpyF32Array,
    reference: impl Fn(&[f64]) -> Vec<f64>,
    tolerance: f64,
) -> Vec<String> {
    let bytes = model.encode_to_vec();
    if let Some(dir) = std::env::var_os("CVM_WRITE_FUZZ_CORPUS") {
        let dir = std::path::PathBuf::from(dir).join("onnx_import");
        std::fs::create_dir_all(&dir).unwrap();
        // Named by content (FNV-1a), as the tests run in parallel.
        let name = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        std::fs::write(dir.join(format!("lowering-{name:016x}.onnx")), &bytes).unwrap();
    }
    let read = cvm_onnx::read(&bytes).unwrap();
    let importer = Importer::new(&read).unwrap();
    let calibration = importer.calibrate(batch, &mut |_, _| {}).unwrap();
    let imported = importer
        .quantize(
            &calibration,
            Options {
                per_channel: true,
                schedule: 1,
                ..Options::default()
            },
        )
        .unwrap();
    let size = batch.data.len() / batch.shape[0] as usize;
    let mut largest = 0.0f64;
    let mut worst = 0.0f64;
    for sample in batch.data.chunks(size) {
        let input: Vec<f64> = sample.iter().map(|&v| f64::from(v)).collect();
        let float = importer.float_output(sample);
        let expected = reference(&input);
        assert_eq!(float.len(), expected.len());
        for (f, e) in float.iter().zip(&expected) {
            assert!(
                (f - e).abs() <= 1e-9 * e.abs().max(1.0),
                "{float:?} vs {expected:?}"
            );
        }
        let int = imported.run(sample).unwrap();
        for (f, &q) in float.iter().zip(&int) {
            largest = largest.max(f.abs());
            worst = worst.max((f - f64::from(q) * imported.quantization.output_scale).abs());
        }
    }
    assert!(
        worst <= tolerance * largest,
        "integer error {worst} against outputs up to {largest}"
    );
    imported.notes
}

fn int64s(name: &str, values: &[i64]) -> TensorProto {
    raw_i64(name, &[values.len() as i64], values)
}

/// `x.view(x.size(0), -1)` as the TorchScript exporter writes it with a dynamic batch: Shape,
/// Gather of axis 0, Unsqueeze, Concat with −1, Reshape; folded to a fixed reshape.
#[test]
fn the_view_of_a_dynamic_batch_folds_to_a_fixed_reshape() {
    let nodes = vec![
        node("Shape", &["x"], &["shape"]),
        with_attrs(
            node("Gather", &["shape", "zero"], &["batch"]),
            vec![attr_int("axis", 0)],
        ),
        node("Unsqueeze", &["batch", "axes"], &["batch1"]),
        with_attrs(
            node("Concat", &["batch1", "minus_one"], &["target"]),
            vec![attr_int("axis", 0)],
        ),
        node("Reshape", &["x", "target"], &["flat"]),
        node("Relu", &["flat"], &["y"]),
    ];
    let initializers = vec![
        raw_i64("zero", &[], &[0]),
        int64s("axes", &[0]),
        int64s("minus_one", &[-1]),
    ];
    let input = value_info(
        "x",
        FLOAT,
        &[Dim::Param("batch"), Dim::Value(2), Dim::Value(3)],
    );
    let model = graph(nodes, initializers, input, 13);
    let notes = check(
        &model,
        &shaped(samples(16, 6), &[2, 3]),
        |x| x.iter().map(|&v| v.max(0.0)).collect(),
        0.01,
    );
    assert!(
        notes.iter().any(|n| n.contains("taken as a batch of 1")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n.contains("4 nodes")), "{notes:?}");
}

/// An open axis other than the batch needs --input-shape, which names it; given, it imports.
#[test]
fn an_open_axis_past_the_batch_needs_its_shape() {
    let input = value_info("x", FLOAT, &[Dim::Param("batch"), Dim::Param("features")]);
    let model = graph(vec![node("Relu", &["x"], &["y"])], vec![], input, 13);
    let read = cvm_onnx::read(&model.encode_to_vec()).unwrap();
    let message = Importer::new(&read).err().unwrap().to_string();
    assert!(
        message.contains("input \"x\", axis 1")
            && message.contains("\"features\"")
            && message.contains("--input-shape x=1,D"),
        "{message}"
    );
    let shape: InputShape = "x=1,5".parse().unwrap();
    let importer = Importer::with_input_shapes(&read, &[shape]).unwrap();
    assert_eq!(importer.input_shape(), [1, 5]);
    for (bad, expected) in [
        ("y=1,5", "not an input of the model"),
        ("x=1,5,2", "3 dimensions given"),
    ] {
        let shape: InputShape = bad.parse().unwrap();
        let message = Importer::with_input_shapes(&read, &[shape])
            .err()
            .unwrap()
            .to_string();
        assert!(message.contains(expected), "{bad}: {message}");
    }
    assert!("x=1,0".parse::<InputShape>().is_err());
    assert!("x".parse::<InputShape>().is_err());
}

/// `x.mean((2, 3))`: ReduceMean over H and W without keepdims (the axes an attribute before
/// opset 18, an input from it on), and ReduceSum over the channels.
#[test]
fn reductions_over_any_axes() {
    let mean = |x: &[f64]| -> Vec<f64> {
        x.chunks(6)
            .map(|plane| plane.iter().sum::<f64>() / 6.0)
            .collect()
    };
    for opset_version in [13, 18] {
        let reduce = if opset_version >= 18 {
            with_attrs(
                node("ReduceMean", &["x", "axes"], &["y"]),
                vec![attr_int("keepdims", 0)],
            )
        } else {
            with_attrs(
                node("ReduceMean", &["x"], &["y"]),
                vec![attr_ints("axes", &[2, -1]), attr_int("keepdims", 0)],
            )
        };
        let initializers = if opset_version >= 18 {
            vec![int64s("axes", &[2, 3])]
        } else {
            vec![]
        };
        let input = static_info("x", FLOAT, &[1, 3, 2, 3]);
        let model = graph(vec![reduce], initializers, input, opset_version);
        check(&model, &shaped(samples(16, 18), &[3, 2, 3]), mean, 0.02);
    }
    let sum = with_attrs(
        node("ReduceSum", &["x", "axes"], &["y"]),
        vec![attr_int("keepdims", 1)],
    );
    let input = static_info("x", FLOAT, &[1, 3, 4]);
    let model = graph(vec![sum], vec![int64s("axes", &[1])], input, 13);
    check(
        &model,
        &shaped(samples(16, 12), &[3, 4]),
        |x| (0..4).map(|j| x[j] + x[4 + j] + x[8 + j]).collect(),
        0.02,
    );
}

/// Split (sizes as an input from opset 13), Slice with a step, Sub and Sum, Div by a constant.
#[test]
fn split_slice_sub_sum_and_div() {
    let nodes = vec![
        with_attrs(
            node("Split", &["x", "sizes"], &["a", "b", "c"]),
            vec![attr_int("axis", 1)],
        ),
        node("Slice", &["x", "starts", "ends", "axes", "steps"], &["d"]),
        node("Sub", &["a", "b"], &["ab"]),
        node("Div", &["c", "two"], &["c2"]),
        node("Sum", &["ab", "c2", "d"], &["y"]),
    ];
    let initializers = vec![
        int64s("sizes", &[2, 2, 2]),
        int64s("starts", &[1]),
        int64s("ends", &[100]),
        int64s("axes", &[-1]),
        int64s("steps", &[3]),
        raw_f32("two", &[], &[2.0]),
    ];
    let input = static_info("x", FLOAT, &[1, 6]);
    let model = graph(nodes, initializers, input, 13);
    check(
        &model,
        &samples(32, 6),
        |x| {
            // a = x[0..2], b = x[2..4], c = x[4..6], d = x[1], x[4].
            vec![
                x[0] - x[2] + x[4] / 2.0 + x[1],
                x[1] - x[3] + x[5] / 2.0 + x[4],
            ]
        },
        0.03,
    );
}

/// A stride-2 convolution padded only after (TensorFlow's SAME on an even input): an even
/// padding, then the output cut to ONNX's windows.
#[test]
fn uneven_padding_is_an_even_one_cut_back() {
    let weights: Vec<f32> = (0..9).map(|i| (i as f32 - 4.0) / 4.0).collect();
    let conv = with_attrs(
        node("Conv", &["x", "w"], &["y"]),
        vec![
            attr_ints("strides", &[2, 2]),
            attr_ints("pads", &[0, 0, 1, 1]),
        ],
    );
    let input = static_info("x", FLOAT, &[1, 1, 4, 4]);
    let model = graph(
        vec![conv],
        vec![raw_f32("w", &[1, 1, 3, 3], &weights)],
        input,
        13,
    );
    let reference = |x: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        for oy in 0..2 {
            for ox in 0..2 {
                let mut sum = 0.0;
                for ky in 0..3 {
                    for kx in 0..3 {
                        let (y, x_) = (oy * 2 + ky, ox * 2 + kx);
                        if y < 4 && x_ < 4 {
                            sum += x[y * 4 + x_] * f64::from(weights[ky * 3 + kx]);
                        }
                    }
                }
                out.push(sum);
            }
        }
        out
    };
    let notes = check(
        &model,
        &shaped(samples(16, 16), &[1, 4, 4]),
        reference,
        0.02,
    );
    assert!(notes.iter().any(|n| n.contains("cut")), "{notes:?}");
}

/// The tabled activations compute their ONNX formulas.
#[test]
fn tabled_activations() {
    let erf = cvm_onnx_erf;
    type Formula = Box<dyn Fn(f64) -> f64>;
    let cases: Vec<(NodeProto, Vec<TensorProto>, Formula)> = vec![
        (
            with_attrs(
                node("LeakyRelu", &["x"], &["y"]),
                vec![attr_float("alpha", 0.125)],
            ),
            vec![],
            Box::new(|x| if x >= 0.0 { x } else { 0.125 * x }),
        ),
        (
            node("PRelu", &["x", "slope"], &["y"]),
            vec![raw_f32("slope", &[1], &[0.25])],
            Box::new(|x| if x >= 0.0 { x } else { 0.25 * x }),
        ),
        (
            node("HardSwish", &["x"], &["y"]),
            vec![],
            Box::new(|x| x * (x / 6.0 + 0.5).clamp(0.0, 1.0)),
        ),
        (
            with_attrs(
                node("HardSigmoid", &["x"], &["y"]),
                vec![attr_float("alpha", 0.25), attr_float("beta", 0.5)],
            ),
            vec![],
            Box::new(|x| (0.25 * x + 0.5).clamp(0.0, 1.0)),
        ),
        (
            node("Elu", &["x"], &["y"]),
            vec![],
            Box::new(|x: f64| if x > 0.0 { x } else { x.exp() - 1.0 }),
        ),
        (
            node("Softplus", &["x"], &["y"]),
            vec![],
            Box::new(|x: f64| x.exp().ln_1p()),
        ),
        (
            node("Gelu", &["x"], &["y"]),
            vec![],
            Box::new(move |x| 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))),
        ),
        (node("Erf", &["x"], &["y"]), vec![], Box::new(erf)),
    ];
    for (activation, initializers, formula) in cases {
        let op = activation.op_type.clone().unwrap();
        let model = graph(
            vec![activation],
            initializers,
            static_info("x", FLOAT, &[1, 8]),
            20,
        );
        let batch = samples(32, 8);
        let read = cvm_onnx::read(&model.encode_to_vec()).unwrap();
        let importer = Importer::new(&read).unwrap();
        for sample in batch.data.chunks(8) {
            for (out, &x) in importer.float_output(sample).iter().zip(sample) {
                let expected = formula(f64::from(x));
                // The platform's libm here (exp, ln_1p) against the importer's own functions.
                assert!(
                    (out - expected).abs() < 1e-12,
                    "{op}({x}) = {out}, {expected}"
                );
            }
        }
        check(&model, &batch, |x| importer_output(&importer, x), 0.03);
    }
}

fn importer_output(importer: &Importer, x: &[f64]) -> Vec<f64> {
    let sample: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    importer.float_output(&sample)
}

/// erf by its series, for references (the formula, not the importer's code).
fn cvm_onnx_erf(x: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..200 {
        sum += term / f64::from(2 * n + 1);
        term *= -x * x / f64::from(n + 1);
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

/// GELU's tanh form written out, as the TorchScript exporter writes
/// `gelu(x, approximate="tanh")` below opset 20 (`x·x·x`, constants first) and as Hugging
/// Face's GPT-2 writes it (`Pow(x, 3)`, `0.5 · x` first), after a dense layer: each becomes
/// one GELU table, the integer model of the opset-20 `Gelu` node, operator for operator.
#[test]
fn gelu_in_its_tanh_form_written_out_is_one_gelu() {
    let k = (2.0f64 / std::f64::consts::PI).sqrt() as f32;
    let scalar = |name: &str, v: f32| raw_f32(name, &[], &[v]);
    let weight: Vec<f32> = (0..64)
        .map(|i| ((i * 37 % 17) as f32 - 8.0) / 6.0)
        .collect();
    let constants = || {
        vec![
            raw_f32("w", &[8, 8], &weight),
            scalar("c", 0.044715),
            scalar("k", k),
            scalar("one", 1.0),
            scalar("half", 0.5),
            scalar("three", 3.0),
        ]
    };
    let dense = || node("MatMul", &["x", "w"], &["h"]);
    let torch = vec![
        dense(),
        node("Mul", &["h", "h"], &["h2"]),
        node("Mul", &["h", "h2"], &["h3"]),
        node("Mul", &["c", "h3"], &["ch3"]),
        node("Add", &["h", "ch3"], &["inner"]),
        node("Mul", &["k", "inner"], &["arg"]),
        node("Tanh", &["arg"], &["t"]),
        node("Add", &["one", "t"], &["onet"]),
        node("Mul", &["h", "onet"], &["twice"]),
        node("Mul", &["half", "twice"], &["y"]),
    ];
    let hugging_face = vec![
        dense(),
        node("Mul", &["h", "half"], &["halfh"]),
        node("Pow", &["h", "three"], &["h3"]),
        node("Mul", &["h3", "c"], &["ch3"]),
        node("Add", &["h", "ch3"], &["inner"]),
        node("Mul", &["inner", "k"], &["arg"]),
        node("Tanh", &["arg"], &["t"]),
        node("Add", &["t", "one"], &["onet"]),
        node("Mul", &["halfh", "onet"], &["y"]),
    ];
    let gelu_node = vec![
        dense(),
        with_attrs(
            node("Gelu", &["h"], &["y"]),
            vec![attr_string("approximate", "tanh")],
        ),
    ];
    let batch = samples(32, 8);
    let reference = |x: &[f64]| {
        (0..8)
            .map(|j| {
                let h: f64 = (0..8).map(|i| x[i] * f64::from(weight[i * 8 + j])).sum();
                let k = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * h * (1.0 + (k * (h + 0.044715 * h * h * h)).tanh())
            })
            .collect::<Vec<f64>>()
    };
    let import = |nodes: Vec<NodeProto>| {
        let model = graph(nodes, constants(), static_info("x", FLOAT, &[1, 8]), 20);
        check(&model, &batch, reference, 0.03);
        let read = cvm_onnx::read(&model.encode_to_vec()).unwrap();
        let importer = Importer::new(&read).unwrap();
        let calibration = importer.calibrate(&batch, &mut |_, _| {}).unwrap();
        let imported = importer.quantize(&calibration, Options::default()).unwrap();
        (
            imported.operators,
            imported.gas,
            imported.run(&batch.data[..8]).unwrap(),
        )
    };
    let one_gelu = import(gelu_node);
    assert_eq!(import(torch), one_gelu);
    assert_eq!(import(hugging_face), one_gelu);
}

/// A Pow other than the layer normalization's square and GELU's cube is refused, naming the
/// node.
#[test]
fn a_pow_of_another_exponent_is_refused() {
    let model = graph(
        vec![node("Pow", &["x", "e"], &["y"])],
        vec![raw_f32("e", &[], &[4.0])],
        static_info("x", FLOAT, &[1, 8]),
        17,
    );
    let read = cvm_onnx::read(&model.encode_to_vec()).unwrap();
    let error = Importer::new(&read).err().unwrap().to_string();
    assert!(
        error.contains("Pow") && error.contains("exponent 3"),
        "{error}"
    );
}

/// The causal mask as exporters build it, around one attention of a (1, 4, 8) sequence over
/// itself: `triu(ones, 1)` by `Trilu` and `Cast` into `Where(mask, −∞, scores)`, and
/// `j ≤ i` by `Range`, `Unsqueeze` and `LessOrEqual` into `Where(allowed, scores,
/// finfo.min)`, the latter also with the Softmax guarded by `Where(IsNaN(p), 0, p)`. All fold
/// to the causal softmax.
#[test]
fn causal_masks_by_trilu_and_by_range() {
    const T: usize = 4;
    const D: usize = 8;
    let weight: Vec<f32> = (0..D * D)
        .map(|i| ((i * 29 % 13) as f32 - 6.0) / 32.0)
        .collect();
    let guarded = |mask: Vec<NodeProto>, where_node: NodeProto, guard: bool| {
        let mut nodes = vec![
            node("MatMul", &["x", "wq"], &["q"]),
            with_attrs(
                node("Transpose", &["x"], &["xt"]),
                vec![attr_ints("perm", &[0, 2, 1])],
            ),
            node("MatMul", &["q", "xt"], &["s"]),
        ];
        nodes.extend(mask);
        nodes.push(where_node);
        let softmax = if guard { "raw" } else { "p" };
        nodes.push(with_attrs(
            node("Softmax", &["masked"], &[softmax]),
            vec![attr_int("axis", -1)],
        ));
        if guard {
            // The exporters' guard against a row masked whole.
            nodes.push(node("IsNaN", &["raw"], &["nan"]));
            nodes.push(node("Where", &["nan", "zero_float", "raw"], &["p"]));
        }
        nodes.push(node("MatMul", &["p", "x"], &["y"]));
        graph(
            nodes,
            vec![
                raw_f32("wq", &[D as i64, D as i64], &weight),
                raw_f32("ninf", &[], &[f32::NEG_INFINITY]),
                raw_f32("lowest", &[], &[f32::MIN]),
                raw_f32("zero_float", &[], &[0.0]),
                int64s("square", &[T as i64, T as i64]),
                raw_i64("one", &[], &[1]),
                raw_i64("zero", &[], &[0]),
                raw_i64("length", &[], &[T as i64]),
                int64s("axis0", &[0]),
                int64s("axis1", &[1]),
            ],
            static_info("x", FLOAT, &[1, T as i64, D as i64]),
            17,
        )
    };
    let attention = |mask, where_node| guarded(mask, where_node, false);
    let trilu = attention(
        vec![
            with_attrs(
                node("ConstantOfShape", &["square"], &["ones"]),
                vec![attr_tensor("value", raw_f32("", &[1], &[1.0]))],
            ),
            with_attrs(
                node("Trilu", &["ones", "one"], &["future"]),
                vec![attr_int("upper", 1)],
            ),
            with_attrs(
                node("Cast", &["future"], &["mask"]),
                vec![attr_int("to", 9)],
            ),
        ],
        node("Where", &["mask", "ninf", "s"], &["masked"]),
    );
    let range_mask = || {
        vec![
            node("Range", &["zero", "length", "one"], &["positions"]),
            node("Unsqueeze", &["positions", "axis1"], &["i"]),
            node("Unsqueeze", &["positions", "axis0"], &["j"]),
            node("LessOrEqual", &["j", "i"], &["allowed"]),
        ]
    };
    let range = attention(
        range_mask(),
        node("Where", &["allowed", "s", "lowest"], &["masked"]),
    );
    let reference = |x: &[f64]| {
        let at = |t: usize, d: usize| x[t * D + d];
        let q: Vec<f64> = (0..T * D)
            .map(|k| {
                (0..D)
                    .map(|e| at(k / D, e) * f64::from(weight[e * D + k % D]))
                    .sum()
            })
            .collect();
        let mut y = vec![0.0; T * D];
        for i in 0..T {
            let scores: Vec<f64> = (0..=i)
                .map(|j| (0..D).map(|e| q[i * D + e] * at(j, e)).sum())
                .collect();
            let top = scores.iter().copied().fold(f64::MIN, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
            let total: f64 = weights.iter().sum();
            for (j, w) in weights.iter().enumerate() {
                for d in 0..D {
                    y[i * D + d] += w / total * at(j, d);
                }
            }
        }
        y
    };
    let range_guarded = guarded(
        range_mask(),
        node("Where", &["allowed", "s", "lowest"], &["masked"]),
        true,
    );
    let batch = shaped(samples(16, T * D), &[T as u32, D as u32]);
    for model in [trilu, range, range_guarded] {
        // int8 queries, keys and values: the worst element within 5 % of the largest output.
        check(&model, &batch, reference, 0.05);
    }
    // The complement of the mask in the first form is not a causal mask.
    let flipped = attention(
        vec![
            with_attrs(
                node("ConstantOfShape", &["square"], &["ones"]),
                vec![attr_tensor("value", raw_f32("", &[1], &[1.0]))],
            ),
            with_attrs(
                node("Trilu", &["ones", "zero"], &["past"]),
                vec![attr_int("upper", 0)],
            ),
            with_attrs(node("Cast", &["past"], &["mask"]), vec![attr_int("to", 9)]),
        ],
        node("Where", &["mask", "ninf", "s"], &["masked"]),
    );
    let read = cvm_onnx::read(&flipped.encode_to_vec()).unwrap();
    let error = Importer::new(&read).err().unwrap().to_string();
    assert!(error.contains("not the causal one"), "{error}");
}

/// RMSNorm as LLaMA's code writes it, `x · rsqrt(mean(x²) + ε) · γ` (`torch.rsqrt` exports as
/// `Sqrt` then `Reciprocal`), in either order of the product: one `layer_norm`, as the
/// division form is.
#[test]
fn rms_norm_by_reciprocal_square_root() {
    const D: usize = 8;
    let gamma: Vec<f32> = (0..D).map(|i| 0.5 + i as f32 / 8.0).collect();
    let form = |x_first: bool| {
        let product = if x_first { ["x", "r"] } else { ["r", "x"] };
        graph(
            vec![
                node("Pow", &["x", "two"], &["x2"]),
                with_attrs(
                    node("ReduceMean", &["x2"], &["m"]),
                    vec![attr_ints("axes", &[-1]), attr_int("keepdims", 1)],
                ),
                node("Add", &["m", "eps"], &["me"]),
                node("Sqrt", &["me"], &["root"]),
                node("Reciprocal", &["root"], &["r"]),
                node("Mul", &product, &["normed"]),
                node("Mul", &["normed", "gamma"], &["y"]),
            ],
            vec![
                raw_f32("two", &[], &[2.0]),
                raw_f32("eps", &[], &[1e-6]),
                raw_f32("gamma", &[D as i64], &gamma),
            ],
            static_info("x", FLOAT, &[1, 4, D as i64]),
            17,
        )
    };
    let reference = |x: &[f64]| {
        x.chunks(D)
            .flat_map(|row| {
                let mean = row.iter().map(|v| v * v).sum::<f64>() / D as f64;
                let inverse = 1.0 / (mean + f64::from(1e-6f32)).sqrt();
                row.iter()
                    .zip(&gamma)
                    .map(move |(v, &g)| v * inverse * f64::from(g))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let batch = shaped(samples(16, 4 * D), &[4, D as u32]);
    for x_first in [true, false] {
        let notes = check(&form(x_first), &batch, reference, 0.03);
        assert!(
            notes
                .iter()
                .any(|n| n.contains("an RMSNorm written out, read as one")),
            "{notes:?}"
        );
    }
    // A Reciprocal of anything else is refused, naming the pattern.
    let model = graph(
        vec![node("Reciprocal", &["x"], &["y"])],
        Vec::new(),
        static_info("x", FLOAT, &[1, 8]),
        17,
    );
    let read = cvm_onnx::read(&model.encode_to_vec()).unwrap();
    let error = Importer::new(&read).err().unwrap().to_string();
    assert!(error.contains("Reciprocal"), "{error}");
}

/// BERT's pooler as Hugging Face exports it: the first token's hidden state (`Gather` of index
/// 0 on axis 1, or `Slice` and `Squeeze`), a dense layer (MatMul and Add, or Gemm) and Tanh.
#[test]
fn the_tanh_pooler_of_the_first_token() {
    const T: usize = 4;
    const D: usize = 8;
    let weight: Vec<f32> = (0..D * D)
        .map(|i| ((i * 37 % 17) as f32 - 8.0) / 16.0)
        .collect();
    let bias: Vec<f32> = (0..D).map(|i| i as f32 / 32.0 - 0.1).collect();
    let first_token = |by_slice: bool| {
        if by_slice {
            vec![
                node("Slice", &["x", "zero", "one", "axis"], &["sliced"]),
                node("Squeeze", &["sliced", "axis"], &["first"]),
            ]
        } else {
            vec![with_attrs(
                node("Gather", &["x", "index"], &["first"]),
                vec![attr_int("axis", 1)],
            )]
        }
    };
    let form = |by_slice: bool, gemm: bool| {
        let mut nodes = first_token(by_slice);
        if gemm {
            nodes.push(with_attrs(
                node("Gemm", &["first", "w", "b"], &["dense"]),
                vec![attr_int("transB", 0)],
            ));
        } else {
            nodes.push(node("MatMul", &["first", "w"], &["product"]));
            nodes.push(node("Add", &["product", "b"], &["dense"]));
        }
        nodes.push(node("Tanh", &["dense"], &["y"]));
        graph(
            nodes,
            vec![
                raw_f32("w", &[D as i64, D as i64], &weight),
                raw_f32("b", &[D as i64], &bias),
                raw_i64("index", &[], &[0]),
                int64s("zero", &[0]),
                int64s("one", &[1]),
                int64s("axis", &[1]),
            ],
            static_info("x", FLOAT, &[1, T as i64, D as i64]),
            17,
        )
    };
    let reference = |x: &[f64]| {
        (0..D)
            .map(|n| {
                let sum: f64 = (0..D)
                    .map(|k| x[k] * f64::from(weight[k * D + n]))
                    .sum::<f64>()
                    + f64::from(bias[n]);
                sum.tanh()
            })
            .collect()
    };
    let batch = shaped(samples(16, T * D), &[T as u32, D as u32]);
    for by_slice in [false, true] {
        for gemm in [false, true] {
            check(&form(by_slice, gemm), &batch, reference, 0.03);
        }
    }
}
