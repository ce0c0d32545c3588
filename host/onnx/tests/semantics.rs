//! The importer imports a model with ONNX's meaning or refuses it: attributes it cannot honour
//! (a Pad's value before opset 11, blocked quantization, batch normalization in training mode,
//! a Softmax over another axis than the last, a rank above the CVM's six) are refused naming the
//! node, an input without values is refused, a Pad is folded into MaxPool only where its zeros
//! cannot change a maximum, and a fold that rewrites a value in place happens only when nothing
//! else reads it under any name.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly
#![allow(clippy::float_arithmetic)] // expected float outputs

mod common;

use common::*;
use cvm_formats::npy::NpyF32Array;
use cvm_onnx::import::{Importer, Options};
use cvm_onnx::proto::{GraphProto, ModelProto, NodeProto, TensorProto};
use prost::Message;

fn graph(
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    input: &[i64],
    output: &[i64],
) -> ModelProto {
    model(GraphProto {
        name: Some("g".into()),
        node: nodes,
        initializer: initializers,
        input: vec![static_info("x", FLOAT, input)],
        output: vec![static_info("y", FLOAT, output)],
        ..Default::default()
    })
}

/// The import's error message, or `None` when the model imports.
fn refusal(model: &ModelProto, calibration: &NpyF32Array) -> Option<String> {
    let read = match cvm_onnx::read(&model.encode_to_vec()) {
        Ok(read) => read,
        Err(error) => return Some(error.to_string()),
    };
    let importer = match Importer::new(&read) {
        Ok(importer) => importer,
        Err(error) => return Some(error.to_string()),
    };
    let calibration = match importer.calibrate(calibration, &mut |_, _| {}) {
        Ok(calibration) => calibration,
        Err(error) => return Some(error.to_string()),
    };
    importer
        .quantize(
            &calibration,
            Options {
                per_channel: true,
                schedule: 1,
                ..Options::default()
            },
        )
        .err()
        .map(|error| error.to_string())
}

fn samples(shape: &[u32], values: impl Fn(usize) -> f32) -> NpyF32Array {
    let count: usize = shape.iter().map(|&d| d as usize).product();
    NpyF32Array {
        shape: shape.to_vec(),
        data: (0..count).map(values).collect(),
    }
}

fn refused(model: &ModelProto, calibration: &NpyF32Array, expected: &[&str]) {
    let message = refusal(model, calibration).expect("refused");
    for part in expected {
        assert!(message.contains(part), "{message}");
    }
}

#[test]
fn an_input_without_values_is_refused() {
    let model = graph(
        vec![node("Relu", &["x"], &["y"])],
        vec![],
        &[1, 1, 0, 5],
        &[1, 1, 0, 5],
    );
    refused(
        &model,
        &samples(&[2, 1, 0, 5], |_| 0.0),
        &["input \"x\"", "holds no value"],
    );
}

#[test]
fn attributes_the_importer_cannot_honour_are_refused_naming_the_node() {
    let image = samples(&[4, 1, 4, 4], |i| (i % 7) as f32 - 3.0);
    let weight = raw_f32("w", &[1, 1, 3, 3], &[0.5; 9]);
    // Opset 10: the padding value is an attribute.
    let mut opset_10 = graph(
        vec![
            with_attrs(
                named("pad", node("Pad", &["x"], &["p"])),
                vec![
                    attr_ints("pads", &[0, 0, 1, 1, 0, 0, 1, 1]),
                    attr_float("value", 5.0),
                ],
            ),
            node("Conv", &["p", "w"], &["y"]),
        ],
        vec![weight.clone()],
        &[1, 1, 4, 4],
        &[1, 1, 4, 4],
    );
    opset_10.opset_import = vec![opset("", 10)];
    refused(
        &opset_10,
        &image,
        &["\"pad\" (Pad)", "non-zero padding value"],
    );
    let training = graph(
        vec![with_attrs(
            named(
                "bn",
                node("BatchNormalization", &["x", "s", "b", "m", "v"], &["y"]),
            ),
            vec![attr_int("training_mode", 1)],
        )],
        ["s", "b", "m", "v"]
            .iter()
            .map(|name| raw_f32(name, &[1], &[1.0]))
            .collect(),
        &[1, 1, 4, 4],
        &[1, 1, 4, 4],
    );
    refused(
        &training,
        &image,
        &["\"bn\" (BatchNormalization)", "training_mode = 1"],
    );
    let softmax = graph(
        vec![
            node("Flatten", &["x"], &["f"]),
            with_attrs(
                named("softmax", node("Softmax", &["f"], &["y"])),
                vec![attr_int("axis", 0)],
            ),
        ],
        vec![],
        &[1, 1, 4, 4],
        &[1, 16],
    );
    refused(
        &softmax,
        &image,
        &["\"softmax\" (Softmax)", "axis 0 of data of rank 2"],
    );
    let unsqueeze = graph(
        vec![named(
            "unsqueeze",
            node("Unsqueeze", &["x", "axes"], &["y"]),
        )],
        vec![raw_i64("axes", &[3], &[0, 1, 2])],
        &[1, 1, 4, 4],
        &[1, 1, 1, 1, 1, 4, 4],
    );
    refused(
        &unsqueeze,
        &image,
        &[
            "\"unsqueeze\" (Unsqueeze)",
            "7 dimensions; a CVM tensor has at most 6",
        ],
    );
    let blocked = graph(
        vec![
            with_attrs(
                named("dq", node("DequantizeLinear", &["wq", "ws"], &["w"])),
                vec![attr_int("block_size", 2)],
            ),
            node("MatMul", &["x", "w"], &["y"]),
        ],
        vec![
            TensorProto {
                int32_data: vec![1, 2, 3, 4, 5, 6, 7, 8],
                ..tensor("wq", INT8, &[4, 2])
            },
            raw_f32("ws", &[2, 2], &[0.1, 0.2, 0.3, 0.4]),
        ],
        &[1, 4],
        &[1, 2],
    );
    refused(
        &blocked,
        &samples(&[4, 4], |i| i as f32),
        &["\"dq\" (DequantizeLinear)", "block_size"],
    );
}

#[test]
fn a_pad_folds_into_max_pooling_only_over_values_that_cannot_be_negative() {
    let pool = |input: &str| {
        with_attrs(
            named("pool", node("MaxPool", &[input], &["y"])),
            vec![attr_ints("kernel_shape", &[2, 2])],
        )
    };
    let pad = |input: &str| named("pad", node("Pad", &[input, "pads"], &["p"]));
    let pads = raw_i64("pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]);
    let negative = samples(&[4, 1, 4, 4], |i| -((i % 5) as f32) - 1.0);
    let over_input = graph(
        vec![pad("x"), pool("p")],
        vec![pads.clone()],
        &[1, 1, 4, 4],
        &[1, 1, 5, 5],
    );
    refused(
        &over_input,
        &negative,
        &["\"pool\" (MaxPool)", "Pad of values that may be negative"],
    );
    let after_relu = graph(
        vec![node("Relu", &["x"], &["r"]), pad("r"), pool("p")],
        vec![pads],
        &[1, 1, 4, 4],
        &[1, 1, 5, 5],
    );
    assert_eq!(refusal(&after_relu, &negative), None);
}

/// y = (x·W + b) + x·W with x·W read under two names (Identity, Identity): the bias must be added
/// once. Folding it into the product, which the second Identity also reads, added it twice.
#[test]
fn a_value_read_under_several_names_is_not_rewritten_by_a_fold() {
    let w: Vec<f32> = vec![
        1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
    ];
    let model = graph(
        vec![
            node("MatMul", &["x", "w"], &["c"]),
            node("Identity", &["c"], &["d1"]),
            node("Identity", &["c"], &["d2"]),
            node("Add", &["d1", "b"], &["e"]),
            node("Add", &["e", "d2"], &["y"]),
        ],
        vec![
            raw_f32("w", &[4, 4], &w),
            raw_f32("b", &[4], &[1.0, 2.0, 3.0, 4.0]),
        ],
        &[1, 4],
        &[1, 4],
    );
    let read = cvm_onnx::read(&model.encode_to_vec()).unwrap();
    let importer = Importer::new(&read).unwrap();
    let calibration = samples(&[8, 4], |i| ((i * 5) % 9) as f32 - 4.0);
    let calibration = importer.calibrate(&calibration, &mut |_, _| {}).unwrap();
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
    let x = [0.5f32, -1.0, 2.0, 1.0];
    let output = imported.run(&x).unwrap();
    let scale = imported.quantization.output_scale;
    for (k, (&q, b)) in output.iter().zip([1.0, 2.0, 3.0, 4.0]).enumerate() {
        let expected = 2.0 * f64::from(x[k]) + b;
        let got = f64::from(q) * scale;
        assert!(
            (got - expected).abs() < 0.1,
            "output {k}: {got} for {expected} (all: {output:?} · {scale})"
        );
    }
}
