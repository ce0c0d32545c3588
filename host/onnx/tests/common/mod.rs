//! Builders of ONNX models from the generated prost types, for the tests.
#![allow(dead_code)]

use cvm_onnx::proto::attribute_proto::AttributeType;
use cvm_onnx::proto::tensor_shape_proto::{Dimension, dimension};
use cvm_onnx::proto::type_proto::{Tensor as TensorType, Value as TypeValue};
use cvm_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use prost::Message;

pub const FLOAT: i32 = 1;
pub const UINT8: i32 = 2;
pub const INT8: i32 = 3;
pub const INT32: i32 = 6;
pub const INT64: i32 = 7;

/// A dimension of a declared shape.
pub enum Dim {
    Value(i64),
    Param(&'static str),
    Missing,
}

pub fn value_info(name: &str, elem_type: i32, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|dim| Dimension {
            value: match dim {
                Dim::Value(size) => Some(dimension::Value::DimValue(*size)),
                Dim::Param(param) => Some(dimension::Value::DimParam(param.to_string())),
                Dim::Missing => None,
            },
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

/// A value info of static dims.
pub fn static_info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    let dims: Vec<Dim> = dims.iter().map(|&size| Dim::Value(size)).collect();
    value_info(name, elem_type, &dims)
}

pub fn tensor(name: &str, data_type: i32, dims: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(data_type),
        dims: dims.to_vec(),
        ..Default::default()
    }
}

pub fn raw_f32(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..tensor(name, FLOAT, dims)
    }
}

pub fn raw_i64(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..tensor(name, INT64, dims)
    }
}

pub fn typed_f32(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        float_data: values.to_vec(),
        ..tensor(name, FLOAT, dims)
    }
}

pub fn node(op_type: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op_type.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn named(name: &str, node: NodeProto) -> NodeProto {
    NodeProto {
        name: Some(name.into()),
        ..node
    }
}

fn attribute(name: &str, kind: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

pub fn attr_int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        i: Some(value),
        ..attribute(name, AttributeType::Int)
    }
}

pub fn attr_float(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        f: Some(value),
        ..attribute(name, AttributeType::Float)
    }
}

pub fn attr_string(name: &str, value: &str) -> AttributeProto {
    AttributeProto {
        s: Some(value.as_bytes().to_vec()),
        ..attribute(name, AttributeType::String)
    }
}

pub fn attr_ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        ints: values.to_vec(),
        ..attribute(name, AttributeType::Ints)
    }
}

pub fn attr_floats(name: &str, values: &[f32]) -> AttributeProto {
    AttributeProto {
        floats: values.to_vec(),
        ..attribute(name, AttributeType::Floats)
    }
}

pub fn attr_strings(name: &str, values: &[&str]) -> AttributeProto {
    AttributeProto {
        strings: values.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..attribute(name, AttributeType::Strings)
    }
}

pub fn attr_tensor(name: &str, value: TensorProto) -> AttributeProto {
    AttributeProto {
        t: Some(value),
        ..attribute(name, AttributeType::Tensor)
    }
}

pub fn attr_graph(name: &str, graph: GraphProto) -> AttributeProto {
    AttributeProto {
        g: Some(graph),
        ..attribute(name, AttributeType::Graph)
    }
}

pub fn with_attrs(node: NodeProto, attributes: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        attribute: attributes,
        ..node
    }
}

pub fn opset(domain: &str, version: i64) -> OperatorSetIdProto {
    OperatorSetIdProto {
        domain: Some(domain.into()),
        version: Some(version),
    }
}

/// A model of IR 8 importing opset 13 of the default domain.
pub fn model(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![opset("", 13)],
        producer_name: Some("cvm-onnx tests".into()),
        producer_version: Some("1".into()),
        graph: Some(graph),
    }
}

/// A tiny MLP: x[1,4] → Gemm(W1 raw, B1 typed, transB) → Relu → Gemm(W2 typed, B2 raw) → y[1,2].
pub fn mlp() -> ModelProto {
    let w1: Vec<f32> = (0..12i16).map(|i| f32::from(i - 6)).collect();
    let w2: Vec<f32> = (0..6i16).map(f32::from).collect();
    model(GraphProto {
        name: Some("mlp".into()),
        node: vec![
            with_attrs(
                named("fc1", node("Gemm", &["x", "W1", "B1"], &["h"])),
                vec![attr_int("transB", 1), attr_float("alpha", 1.0)],
            ),
            node("Relu", &["h"], &["r"]),
            with_attrs(
                named("fc2", node("Gemm", &["r", "W2", "B2"], &["y"])),
                vec![attr_int("transB", 1)],
            ),
        ],
        initializer: vec![
            raw_f32("W1", &[3, 4], &w1),
            typed_f32("B1", &[3], &[0.5, -0.25, f32::MIN_POSITIVE]),
            typed_f32("W2", &[2, 3], &w2),
            raw_f32("B2", &[2], &[-0.0, 1.5]),
        ],
        input: vec![static_info("x", FLOAT, &[1, 4])],
        output: vec![static_info("y", FLOAT, &[1, 2])],
        ..Default::default()
    })
}

/// A small int8 conv net in the QDQ style: DequantizeLinear of int8 weights (int32_data) with
/// a Constant scale, Conv with list, string and float attributes, a uint8 and an int64 tensor,
/// an initializer also listed as an input (IR 3 style), `ai.onnx` written for the default
/// domain and an unused `com.microsoft` import.
pub fn conv_net() -> ModelProto {
    let weights: Vec<i32> = (0..18).map(|i| i * 15 - 128).collect();
    let mut conv_model = model(GraphProto {
        name: Some("conv".into()),
        node: vec![
            with_attrs(
                named("scale", node("Constant", &[], &["w_scale"])),
                vec![attr_tensor("value", raw_f32("", &[], &[0.0625]))],
            ),
            named(
                "dq",
                node("DequantizeLinear", &["W_q", "w_scale", "w_zp"], &["W"]),
            ),
            NodeProto {
                domain: Some("ai.onnx".into()),
                ..with_attrs(
                    named("conv", node("Conv", &["x", "W", "B"], &["c", ""])),
                    vec![
                        attr_ints("pads", &[1, 1, 1, 1]),
                        attr_ints("kernel_shape", &[3, 3]),
                        attr_string("auto_pad", "NOTSET"),
                        attr_floats("unused_floats", &[1.0, f32::NAN]),
                        attr_strings("unused_strings", &["a", "é"]),
                    ],
                )
            },
            node("Reshape", &["c", "shape"], &["flat"]),
            node("Add", &["flat", "offset"], &["y"]),
        ],
        initializer: vec![
            TensorProto {
                int32_data: weights.clone(),
                ..tensor("W_q", INT8, &[2, 1, 3, 3])
            },
            TensorProto {
                raw_data: Some(vec![0xff]),
                ..tensor("w_zp", INT8, &[])
            },
            TensorProto {
                raw_data: Some([7i32, -9].iter().flat_map(|v| v.to_le_bytes()).collect()),
                ..tensor("B", INT32, &[2])
            },
            TensorProto {
                int64_data: vec![1, -1],
                ..tensor("shape", INT64, &[2])
            },
            TensorProto {
                raw_data: Some(vec![0, 128, 255]),
                ..tensor("u8", UINT8, &[3])
            },
            TensorProto {
                int32_data: vec![0, 255],
                ..tensor("u8_typed", UINT8, &[2])
            },
            TensorProto {
                int32_data: vec![3],
                ..tensor("offset", INT32, &[1])
            },
        ],
        input: vec![
            static_info("x", FLOAT, &[1, 1, 4, 4]),
            static_info("W_q", INT8, &[2, 1, 3, 3]),
        ],
        output: vec![value_info("y", FLOAT, &[Dim::Value(1), Dim::Param("n")])],
        ..Default::default()
    });
    conv_model.opset_import = vec![opset("ai.onnx", 13), opset("com.microsoft", 1)];
    conv_model
}

pub fn encode(model: &ModelProto) -> Vec<u8> {
    model.encode_to_vec()
}

/// The message `read` gives for `model`, which must be refused.
pub fn error_of(model: &ModelProto) -> String {
    match cvm_onnx::read(&encode(model)) {
        Ok(read) => panic!("expected an error, read {read:?}"),
        Err(error) => error.to_string(),
    }
}
