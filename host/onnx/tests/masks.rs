//! Several integer inputs: token ids and an attention mask, read as sentence encoders write
//! them (the mask into a Softmax's scores as an additive mask, and mean pooling over it). The
//! model is built here with the prost types.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly
#![allow(clippy::float_arithmetic)] // float outputs compared

mod common;

use common::*;
use cvm_formats::npy::NpyF32Array;
use cvm_onnx::import::{Holds, Importer, Options};
use cvm_onnx::proto::{GraphProto, ModelProto};
use prost::Message;

const T: usize = 6;
const V: usize = 12;
const D: usize = 8;

/// Embedding, one attention over itself with the padding mask, mean pooling over the mask;
/// with `passthrough`, a second output forwarding the mask.
fn encoder(passthrough: bool) -> ModelProto {
    let table: Vec<f32> = (0..V * D)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) / 16.0)
        .collect();
    let scalar = |name: &str, v: f32| raw_f32(name, &[], &[v]);
    let mut nodes = vec![
        node("Gather", &["table", "ids"], &["e"]),
        with_attrs(
            node("Transpose", &["e"], &["et"]),
            vec![attr_ints("perm", &[0, 2, 1])],
        ),
        node("MatMul", &["e", "et"], &["s"]),
        node("Unsqueeze", &["mask", "axis1"], &["m1"]),
        with_attrs(node("Cast", &["m1"], &["mf"]), vec![attr_int("to", 1)]),
        node("Sub", &["one", "mf"], &["inverted"]),
        node("Mul", &["inverted", "lowest"], &["additive"]),
        node("Add", &["s", "additive"], &["masked"]),
        with_attrs(
            node("Softmax", &["masked"], &["p"]),
            vec![attr_int("axis", -1)],
        ),
        node("MatMul", &["p", "e"], &["context"]),
        node("Unsqueeze", &["mask", "last"], &["m2"]),
        node("Shape", &["context"], &["context_shape"]),
        node("Expand", &["m2", "context_shape"], &["m3"]),
        with_attrs(node("Cast", &["m3"], &["m3f"]), vec![attr_int("to", 1)]),
        node("Mul", &["context", "m3f"], &["kept"]),
        with_attrs(
            node("ReduceSum", &["kept", "axis1"], &["sum"]),
            vec![attr_int("keepdims", 0)],
        ),
        with_attrs(
            node("ReduceSum", &["m3f", "axis1"], &["count"]),
            vec![attr_int("keepdims", 0)],
        ),
        node("Clip", &["count", "tiny", ""], &["clipped"]),
        node("Div", &["sum", "clipped"], &["y"]),
    ];
    let mut output = vec![value_info(
        "y",
        FLOAT,
        &[Dim::Param("batch"), Dim::Value(D as i64)],
    )];
    if passthrough {
        nodes.push(node("Identity", &["mask"], &["mask_out"]));
        output.push(value_info(
            "mask_out",
            INT64,
            &[Dim::Param("batch"), Dim::Value(T as i64)],
        ));
    }
    let mut model = model(GraphProto {
        name: Some("encoder".into()),
        node: nodes,
        initializer: vec![
            raw_f32("table", &[V as i64, D as i64], &table),
            scalar("one", 1.0),
            scalar("lowest", f32::MIN),
            scalar("tiny", 1e-9),
            raw_i64("axis1", &[1], &[1]),
            raw_i64("last", &[1], &[-1]),
        ],
        input: vec![
            value_info("ids", INT64, &[Dim::Param("batch"), Dim::Value(T as i64)]),
            value_info("mask", INT64, &[Dim::Param("batch"), Dim::Value(T as i64)]),
        ],
        output,
        ..Default::default()
    });
    model.opset_import = vec![opset("", 17)];
    model
}

fn import_error(model: &ModelProto) -> String {
    Importer::new(&read(model)).err().unwrap().to_string()
}

fn read(model: &ModelProto) -> cvm_onnx::OnnxModel {
    cvm_onnx::read(&model.encode_to_vec()).unwrap()
}

/// `count` sequences of lengths 1 to T (token ids, padding 0) and their masks.
fn sequences(count: usize) -> (NpyF32Array, NpyF32Array) {
    let (mut ids, mut mask) = (Vec::new(), Vec::new());
    for s in 0..count {
        let length = 1 + s % T;
        for t in 0..T {
            let kept = t < length;
            ids.push(if kept {
                ((s * 7 + t * 5) % (V - 1) + 1) as f32
            } else {
                0.0
            });
            mask.push(if kept { 1.0 } else { 0.0 });
        }
    }
    let shape = vec![count as u32, T as u32];
    (
        NpyF32Array {
            shape: shape.clone(),
            data: ids,
        },
        NpyF32Array { shape, data: mask },
    )
}

#[test]
fn ids_and_mask_import_and_masked_positions_change_nothing() {
    let model = read(&encoder(false));
    let importer = Importer::new(&model).unwrap();
    let inputs = importer.inputs();
    assert_eq!(inputs[0].holds, Holds::Ids { vocabulary: V });
    assert_eq!(inputs[1].holds, Holds::Mask);
    let (ids, mask) = sequences(24);
    let batch = [ids.clone(), mask.clone()];
    let calibration = importer.calibrate_inputs(&batch, &mut |_, _| {}).unwrap();
    let imported = importer.quantize(&calibration, Options::default()).unwrap();
    let scale = imported.quantization.output_scale;
    for s in 0..24 {
        let (i, m) = (
            &ids.data[s * T..(s + 1) * T],
            &mask.data[s * T..(s + 1) * T],
        );
        let float = importer.float_output_of(&[i, m]);
        let int = imported.run_inputs(&[i, m]).unwrap();
        let largest = float.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        for (f, &q) in float.iter().zip(&int) {
            assert!(
                (f - f64::from(q) * scale).abs() <= 0.05 * largest.max(1e-3),
                "{s}: {float:?} {int:?}"
            );
        }
        // Other ids at the masked positions: the same outputs, float and integer.
        let other: Vec<f32> = i
            .iter()
            .zip(m)
            .map(|(&id, &k)| if k == 0.0 { 3.0 } else { id })
            .collect();
        assert_eq!(importer.float_output_of(&[&other, m]), float);
        assert_eq!(imported.run_inputs(&[&other, m]).unwrap(), int);
    }
    // A mask value other than 0 or 1, an id past the table: refused before anything runs.
    let mut bad = mask.clone();
    bad.data[3] = 2.0;
    let message = importer
        .calibrate_inputs(&[ids.clone(), bad], &mut |_, _| {})
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("input \"mask\"")
            && message.contains("not an attention mask value (0 or 1)"),
        "{message}"
    );
    let mut bad = ids.clone();
    bad.data[0] = V as f32;
    let message = importer
        .calibrate_inputs(&[bad, mask.clone()], &mut |_, _| {})
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("not a token id (an integer from 0 to 11)"),
        "{message}"
    );
    let message = importer
        .calibrate_inputs(&[ids], &mut |_, _| {})
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("1 arrays for the model's 2 inputs"),
        "{message}"
    );
}

#[test]
fn several_outputs_need_one_named() {
    let model = read(&encoder(true));
    let message = Importer::new(&model).err().unwrap().to_string();
    assert!(
        message.contains(
            "2 outputs (\"y\", \"mask_out\"); name the one to import with --graph-output NAME"
        ),
        "{message}"
    );
    let message = Importer::with_output(&model, &[], Some("z"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("--graph-output \"z\": not an output"),
        "{message}"
    );
    let message = Importer::with_output(&model, &[], Some("mask_out"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("integer input passed through"),
        "{message}"
    );
    assert!(Importer::with_output(&model, &[], Some("y")).is_ok());
}

#[test]
fn a_mask_read_another_way_is_refused_naming_the_node() {
    let mut proto = encoder(false);
    let graph = proto.graph.as_mut().unwrap();
    // The additive mask's factor too small to mask: refused.
    graph.initializer[2] = raw_f32("lowest", &[], &[-10.0]);
    let message = import_error(&proto);
    assert!(
        message.contains("(Mul)") && message.contains("additive mask"),
        "{message}"
    );
    // The mask through a Relu.
    let mut proto = encoder(false);
    let graph = proto.graph.as_mut().unwrap();
    graph.node[4] = node("Relu", &["m1"], &["mf"]);
    let message = import_error(&proto);
    assert!(
        message.contains("(Relu)") && message.contains("is an attention mask"),
        "{message}"
    );
}
