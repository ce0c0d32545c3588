//! `cvm_onnx::read` on models built here with the prost types: two valid models read back field
//! by field, then every refusal with its message.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

mod common;

use common::*;
use cvm_onnx::proto::attribute_proto::AttributeType;
use cvm_onnx::proto::tensor_proto::Segment;
use cvm_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, SparseTensorProto, StringStringEntryProto, TensorProto,
    TypeProto, ValueInfoProto,
};
use cvm_onnx::{AttributeValue, Dimension, ElementType, GraphOutput, OnnxError, TensorData};

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn float_bits(data: &TensorData) -> Vec<u32> {
    match data {
        TensorData::Float32(values) => bits(values),
        other => panic!("not float32: {other:?}"),
    }
}

#[test]
fn a_tiny_mlp_reads_back() {
    let model = cvm_onnx::read(&encode(&mlp())).unwrap();
    assert_eq!(model.ir_version, 8);
    assert_eq!(model.opset_version, 13);
    assert!(model.other_opsets.is_empty());
    assert_eq!(model.producer_name, "cvm-onnx tests");
    assert_eq!(model.producer_version, "1");
    assert_eq!(model.graph_name, "mlp");
    assert_eq!(model.inputs.len(), 1);
    assert_eq!(model.inputs[0].name, "x");
    assert_eq!(model.inputs[0].element_type, ElementType::Float32);
    assert_eq!(model.inputs[0].static_shape(), Some(vec![1, 4]));
    assert_eq!(
        model.outputs,
        vec![GraphOutput {
            name: "y".into(),
            element_type: ElementType::Float32,
            shape: Some(vec![Some(1), Some(2)]),
        }]
    );
    let names: Vec<&str> = model.initializers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["W1", "B1", "W2", "B2"]);
    let w1 = &model.initializers[0];
    assert_eq!(w1.shape, vec![3, 4]);
    let expected: Vec<f32> = (0..12i16).map(|i| f32::from(i - 6)).collect();
    assert_eq!(float_bits(&w1.data), bits(&expected));
    assert_eq!(
        float_bits(&model.initializers[1].data),
        bits(&[0.5, -0.25, f32::MIN_POSITIVE])
    );
    assert_eq!(model.initializers[2].shape, vec![2, 3]);
    assert_eq!(model.initializers[2].data.len(), 6);
    // -0.0 keeps its sign bit: floats are carried, not computed on.
    assert_eq!(float_bits(&model.initializers[3].data), bits(&[-0.0, 1.5]));

    assert_eq!(model.nodes.len(), 3);
    let fc1 = &model.nodes[0];
    assert_eq!(fc1.name, "fc1");
    assert_eq!(fc1.op_type, "Gemm");
    assert_eq!(fc1.domain, "");
    assert_eq!(fc1.inputs, ["x", "W1", "B1"]);
    assert_eq!(fc1.outputs, ["h"]);
    assert_eq!(fc1.attribute("transB"), Some(&AttributeValue::Int(1)));
    assert_eq!(fc1.attribute("alpha"), Some(&AttributeValue::Float(1.0)));
    assert_eq!(fc1.attribute("beta"), None);
    assert_eq!(fc1.label(0), "node 0 \"fc1\" (Gemm)");
    assert_eq!(model.nodes[1].label(1), "node 1 (Relu)");
    assert_eq!(model.nodes[1].inputs, ["h"]);
    assert_eq!(model.nodes[2].outputs, ["y"]);
}

#[test]
fn a_small_conv_net_reads_back() {
    let model = cvm_onnx::read(&encode(&conv_net())).unwrap();
    assert_eq!(model.opset_version, 13);
    assert_eq!(model.other_opsets.len(), 1);
    assert_eq!(model.other_opsets[0].domain, "com.microsoft");
    assert_eq!(model.other_opsets[0].version, 1);
    // W_q is an initializer listed as an input too: a constant, not an input.
    assert_eq!(model.inputs.len(), 1);
    assert_eq!(model.inputs[0].static_shape(), Some(vec![1, 1, 4, 4]));
    assert_eq!(model.outputs[0].shape, Some(vec![Some(1), None]));

    let tensor = |name: &str| {
        model
            .initializers
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no initializer {name}"))
    };
    let w_q = tensor("W_q");
    assert_eq!(w_q.shape, vec![2, 1, 3, 3]);
    assert_eq!(w_q.element_type(), ElementType::Int8);
    let expected: Vec<i8> = (0..18).map(|i| (i * 15 - 128) as i8).collect();
    assert_eq!(w_q.data, TensorData::Int8(expected));
    assert_eq!(tensor("w_zp").shape, Vec::<u32>::new());
    assert_eq!(tensor("w_zp").data, TensorData::Int8(vec![-1]));
    assert_eq!(tensor("B").data, TensorData::Int32(vec![7, -9]));
    assert_eq!(tensor("shape").data, TensorData::Int64(vec![1, -1]));
    assert_eq!(tensor("u8").data, TensorData::Uint8(vec![0, 128, 255]));
    assert_eq!(tensor("u8_typed").data, TensorData::Uint8(vec![0, 255]));
    assert_eq!(tensor("offset").data, TensorData::Int32(vec![3]));

    let constant = &model.nodes[0];
    assert_eq!(constant.op_type, "Constant");
    assert_eq!(constant.inputs, Vec::<String>::new());
    let Some(AttributeValue::Tensor(scale)) = constant.attribute("value") else {
        panic!("no tensor value: {constant:?}");
    };
    assert_eq!(scale.name, "");
    assert_eq!(scale.shape, Vec::<u32>::new());
    assert_eq!(float_bits(&scale.data), bits(&[0.0625]));

    let conv = &model.nodes[2];
    assert_eq!(conv.label(2), "node 2 \"conv\" (Conv)");
    assert_eq!(conv.domain, "", "ai.onnx is read as the default domain");
    assert_eq!(conv.outputs, ["c", ""]);
    assert_eq!(
        conv.attribute("pads"),
        Some(&AttributeValue::Ints(vec![1, 1, 1, 1]))
    );
    assert_eq!(
        conv.attribute("auto_pad"),
        Some(&AttributeValue::String("NOTSET".into()))
    );
    let Some(AttributeValue::Floats(floats)) = conv.attribute("unused_floats") else {
        panic!("no floats");
    };
    assert_eq!(bits(floats), bits(&[1.0, f32::NAN]));
    assert_eq!(
        conv.attribute("unused_strings"),
        Some(&AttributeValue::Strings(vec!["a".into(), "é".into()]))
    );
    let names: Vec<&str> = conv.attributes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "pads",
            "kernel_shape",
            "auto_pad",
            "unused_floats",
            "unused_strings"
        ]
    );
    assert_eq!(model.nodes[4].inputs, ["flat", "offset"]);
}

#[test]
fn optional_inputs_may_be_empty_names() {
    let mut model = mlp();
    let graph = model.graph.as_mut().unwrap();
    graph.node[1] = node("Clip", &["h", "", ""], &["r"]);
    let read = cvm_onnx::read(&encode(&model)).unwrap();
    assert_eq!(read.nodes[1].inputs, ["h", "", ""]);
}

#[test]
fn element_type_codes_round_trip() {
    for (code, element_type) in [
        (1, ElementType::Float32),
        (2, ElementType::Uint8),
        (3, ElementType::Int8),
        (6, ElementType::Int32),
        (7, ElementType::Int64),
    ] {
        assert_eq!(ElementType::from_code(code), Some(element_type));
        assert_eq!(element_type.code(), code);
    }
    for code in [-1, 0, 4, 5, 8, 9, 10, 11, 16, 28, 29, i32::MAX] {
        assert_eq!(ElementType::from_code(code), None, "{code}");
    }
}

#[test]
fn read_file_reads_and_bounds_files() {
    let dir = std::env::temp_dir().join(format!("cvm-onnx-read-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mlp.onnx");
    std::fs::write(&path, encode(&mlp())).unwrap();
    assert_eq!(cvm_onnx::read_file(&path).unwrap().nodes.len(), 3);
    // A sparse file one byte past the limit is refused from its size, without being read.
    let large = dir.join("large.onnx");
    let file = std::fs::File::create(&large).unwrap();
    file.set_len(cvm_onnx::limits::FILE_LIMIT.bytes + 1)
        .unwrap();
    let error = cvm_onnx::read_file(&large).unwrap_err();
    assert!(matches!(error, OnnxError::Read(_)), "{error}");
    assert!(
        error
            .to_string()
            .ends_with("large.onnx: larger than 268435456 bytes, the most a model file (ONNX) may have (docs/limits.md)"),
        "{error}"
    );
    let missing = cvm_onnx::read_file(&dir.join("missing.onnx")).unwrap_err();
    assert!(matches!(missing, OnnxError::Read(_)), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- refusals ----

/// `mlp()` changed by `change`, whose message must be `expected`.
fn check(change: impl FnOnce(&mut ModelProto), expected: &str) {
    let mut model = mlp();
    change(&mut model);
    assert_eq!(error_of(&model), expected);
}

fn graph(model: &mut ModelProto) -> &mut GraphProto {
    model.graph.as_mut().unwrap()
}

#[test]
fn bytes_that_are_not_a_model() {
    let garbage = cvm_onnx::read(&[0xff; 16]).unwrap_err();
    assert!(matches!(garbage, OnnxError::Decode(_)), "{garbage}");
    assert!(
        garbage
            .to_string()
            .starts_with("not an ONNX model: failed to decode Protobuf message: "),
        "{garbage}"
    );
    let bytes = encode(&mlp());
    let truncated = cvm_onnx::read(&bytes[..bytes.len() / 2]).unwrap_err();
    assert!(matches!(truncated, OnnxError::Decode(_)), "{truncated}");
    // The message names where prost stopped, from the model down.
    assert!(
        truncated.to_string().contains("ModelProto.graph"),
        "{truncated}"
    );
    // No bytes are a valid, empty ModelProto.
    assert_eq!(
        cvm_onnx::read(&[]).unwrap_err().to_string(),
        "the model declares no ir_version"
    );
}

#[test]
fn model_level_refusals() {
    check(
        |m| m.ir_version = Some(0),
        "ir_version 0 is not an ONNX IR version (1 or more)",
    );
    check(|m| m.graph = None, "the model has no graph");
    check(
        |m| m.opset_import = vec![opset("com.microsoft", 1)],
        "the model imports no opset of the default domain (\"\" or \"ai.onnx\")",
    );
    check(
        |m| m.opset_import.push(opset("ai.onnx", 17)),
        "the default domain is imported twice; the model must import each domain once",
    );
    check(
        |m| m.opset_import[0].version = Some(-3),
        "opset import of the default domain: version -3 is not an opset version (1 or more)",
    );
    check(
        |m| m.opset_import[0].version = None,
        "opset import of the default domain: version missing is not an opset version (1 or more)",
    );
}

/// Open dimensions are read as the file declares them (the importer decides what they take);
/// an input without even a rank is refused.
#[test]
fn symbolic_and_missing_dimensions_are_read_and_a_missing_shape_refused() {
    let mut model = mlp();
    graph(&mut model).input[0] = value_info(
        "x",
        FLOAT,
        &[Dim::Param("batch"), Dim::Value(4), Dim::Missing],
    );
    let read = cvm_onnx::read(&encode(&model)).unwrap();
    assert_eq!(
        read.inputs[0].shape,
        [
            Dimension::Symbolic("batch".into()),
            Dimension::Fixed(4),
            Dimension::Unknown
        ]
    );
    assert_eq!(read.inputs[0].static_shape(), None);
    check(
        |m| {
            graph(m).input[0] = ValueInfoProto {
                name: Some("x".into()),
                r#type: Some(TypeProto {
                    value: Some(cvm_onnx::proto::type_proto::Value::TensorType(
                        cvm_onnx::proto::type_proto::Tensor {
                            elem_type: Some(FLOAT),
                            shape: None,
                        },
                    )),
                }),
            }
        },
        "input \"x\": it declares no shape, not even its rank; every graph input needs one",
    );
    check(
        |m| graph(m).input[0] = static_info("x", FLOAT, &[1, -4]),
        "input \"x\": dimension -4 on axis 1 is not a size (0 to 4294967295)",
    );
    check(
        |m| graph(m).input[0] = static_info("x", FLOAT, &[1; 9]),
        "input \"x\": rank 9, more than the 8 the engine supports",
    );
    check(
        |m| graph(m).input[0] = static_info("x", FLOAT, &[1 << 14, 1 << 12, 2]),
        "input \"x\": shape [16384, 4096, 2] has more than the 67108864 elements the engine \
         allows in a tensor",
    );
    check(
        |m| graph(m).input[0] = static_info("x", FLOAT, &[i64::from(u32::MAX); 8]),
        "input \"x\": shape [4294967295, 4294967295, 4294967295, 4294967295, 4294967295, \
         4294967295, 4294967295, 4294967295] has more than the 67108864 elements the engine \
         allows in a tensor",
    );
    check(
        |m| {
            graph(m).input[0] = ValueInfoProto {
                name: Some("x".into()),
                r#type: Some(TypeProto { value: None }),
            }
        },
        "input \"x\" is not a tensor: its type is missing, or a sequence, map, optional, \
         sparse tensor or opaque type, none of which is supported",
    );
}

#[test]
fn unsupported_element_types_are_refused() {
    check(
        |m| graph(m).input[0] = static_info("x", 10, &[1, 4]),
        "input \"x\": element type FLOAT16 (10) is not supported (float32, uint8, int8, int32 \
         and int64 are)",
    );
    check(
        |m| graph(m).output[0] = static_info("y", 9, &[1, 2]),
        "output \"y\": element type BOOL (9) is not supported (float32, uint8, int8, int32 and \
         int64 are)",
    );
    check(
        |m| graph(m).initializer[1].data_type = Some(11),
        "initializer \"B1\": element type DOUBLE (11) is not supported (float32, uint8, int8, \
         int32 and int64 are)",
    );
    check(
        |m| graph(m).initializer[1].data_type = Some(99),
        "initializer \"B1\": element type unknown (99) is not supported (float32, uint8, int8, \
         int32 and int64 are)",
    );
    check(
        |m| graph(m).initializer[1].data_type = None,
        "initializer \"B1\": element type UNDEFINED (0) is not supported (float32, uint8, \
         int8, int32 and int64 are)",
    );
}

#[test]
fn tensor_data_that_does_not_match_is_refused() {
    check(
        |m| {
            graph(m).initializer[0]
                .raw_data
                .as_mut()
                .unwrap()
                .pop()
                .map(drop)
                .unwrap()
        },
        "initializer \"W1\": raw_data holds 47 bytes, but its shape [3, 4] of 12 float32 \
         elements needs 48",
    );
    check(
        |m| graph(m).initializer[0].dims = vec![4, 4],
        "initializer \"W1\": raw_data holds 48 bytes, but its shape [4, 4] of 16 float32 \
         elements needs 64",
    );
    check(
        |m| graph(m).initializer[1].float_data.push(1.0),
        "initializer \"B1\": float_data holds 4 values, but its shape [3] has 3 elements",
    );
    check(
        |m| graph(m).initializer[1].float_data.clear(),
        "initializer \"B1\": float_data holds 0 values, but its shape [3] has 3 elements",
    );
    check(
        |m| graph(m).initializer[1].raw_data = Some(vec![0; 12]),
        "initializer \"B1\": it holds its data both in raw_data and in float_data",
    );
    check(
        |m| {
            let b1 = &mut graph(m).initializer[1];
            b1.float_data.clear();
            b1.int32_data = vec![1, 2, 3];
        },
        "initializer \"B1\": its float32 data is in int32_data; float32 data goes in \
         float_data or raw_data",
    );
    check(
        |m| {
            graph(m).initializer.push(TensorProto {
                int32_data: vec![5, 200],
                ..tensor("q", INT8, &[2])
            })
        },
        "initializer \"q\": int32_data[1] = 200 is out of the int8 range -128 to 127",
    );
    check(
        |m| {
            graph(m).initializer.push(TensorProto {
                int32_data: vec![-1],
                ..tensor("q", UINT8, &[1])
            })
        },
        "initializer \"q\": int32_data[0] = -1 is out of the uint8 range 0 to 255",
    );
    check(
        |m| {
            graph(m)
                .initializer
                .push(tensor("big", FLOAT, &[1 << 13, 1 << 14]))
        },
        "initializer \"big\": shape [8192, 16384] has more than the 67108864 elements the \
         engine allows in a tensor",
    );
    check(
        |m| graph(m).initializer.push(tensor("neg", FLOAT, &[3, -1])),
        "initializer \"neg\": dimension -1 on axis 1 is not a size (0 to 4294967295)",
    );
    check(
        |m| graph(m).initializer.push(tensor("deep", FLOAT, &[1; 9])),
        "initializer \"deep\": rank 9, more than the 8 the engine supports",
    );
    check(
        |m| {
            graph(m).initializer[0].segment = Some(Segment {
                begin: Some(0),
                end: Some(4),
            })
        },
        "initializer \"W1\": it is a segment of a larger tensor, which is not supported",
    );
}

/// A model read from memory has no directory to read external data from (`tests/external.rs`
/// reads it from files).
#[test]
fn external_data_is_refused_in_memory() {
    let expected = "initializer \"W1\": its data is external (data_location = EXTERNAL), in a \
                    file beside the model; read the model from its file (cvm_onnx::read_file), \
                    which reads external data from the model's directory";
    check(
        |m| {
            let w1 = &mut graph(m).initializer[0];
            w1.raw_data = None;
            w1.data_location = Some(1);
            w1.external_data = vec![StringStringEntryProto {
                key: Some("location".into()),
                value: Some("weights.bin".into()),
            }];
        },
        expected,
    );
    check(
        |m| graph(m).initializer[0].data_location = Some(1),
        expected,
    );
    check(
        |m| graph(m).initializer[0].data_location = Some(7),
        "initializer \"W1\": data_location 7 is not DEFAULT (0) or EXTERNAL (1)",
    );
    check(
        |m| {
            graph(m).initializer[0].external_data = vec![StringStringEntryProto {
                key: Some("location".into()),
                value: Some("weights.bin".into()),
            }];
        },
        "initializer \"W1\": it has external_data entries, but its data_location is DEFAULT \
         (0), not EXTERNAL (1)",
    );
}

#[test]
fn graph_order_and_definitions_are_checked() {
    check(
        |m| graph(m).node.swap(0, 1),
        "node 0 (Relu) reads \"h\" (input 0), which no graph input, initializer or earlier \
         node defines: node 1 \"fc1\" (Gemm) defines it later, the nodes are not in \
         topological order",
    );
    check(
        |m| graph(m).node[1].input[0] = "nowhere".into(),
        "node 1 (Relu) reads \"nowhere\" (input 0), which no graph input, initializer or \
         earlier node defines",
    );
    check(
        |m| graph(m).node[1].input[0] = "r".into(),
        "node 1 (Relu) reads \"r\" (input 0), which no graph input, initializer or earlier \
         node defines: the node defines it itself",
    );
    check(
        |m| graph(m).node[1].output[0] = "h".into(),
        "node 1 (Relu) defines \"h\", which node 0 \"fc1\" (Gemm) already defines",
    );
    check(
        |m| graph(m).node[1].output[0] = "W2".into(),
        "node 1 (Relu) defines \"W2\", which an initializer already defines",
    );
    check(
        |m| graph(m).node[1].output[0] = "x".into(),
        "node 1 (Relu) defines \"x\", which a graph input already defines",
    );
    check(
        |m| graph(m).node[0].output = vec!["h".into(), "h".into()],
        "node 0 \"fc1\" (Gemm) defines \"h\", which it already defines",
    );
    check(
        |m| graph(m).initializer[1].name = Some("W1".into()),
        "initializer \"W1\" is defined twice",
    );
    check(
        |m| graph(m).initializer[1].name = None,
        "initializer 1 has no name; every initializer needs one",
    );
    check(
        |m| {
            let x = graph(m).input[0].clone();
            graph(m).input.push(x);
        },
        "graph input \"x\" is listed twice",
    );
    check(
        |m| graph(m).output[0].name = Some("z".into()),
        "graph output \"z\" is not defined by any graph input, initializer or node",
    );
    check(
        |m| {
            let y = graph(m).output[0].clone();
            graph(m).output.push(y);
        },
        "graph output \"y\" is listed twice",
    );
    check(
        |m| graph(m).node[1].op_type = None,
        "node 1 () has no op_type",
    );
    check(
        |m| graph(m).node[1].domain = Some("com.example".into()),
        "node 1 (Relu) uses the domain \"com.example\", which the model does not import",
    );
    check(
        |m| {
            graph(m).sparse_initializer.push(SparseTensorProto {
                values: Some(tensor("S", FLOAT, &[0])),
                indices: Some(tensor("S_i", INT64, &[0])),
                dims: vec![4],
            })
        },
        "sparse initializer \"S\" is not supported; store it as a dense initializer",
    );
}

#[test]
fn attributes_are_typed_or_refused() {
    let set = |attribute: AttributeProto| {
        move |m: &mut ModelProto| graph(m).node[1].attribute = vec![attribute]
    };
    check(
        set(attr_graph("then_branch", GraphProto::default())),
        "node 1 (Relu), attribute \"then_branch\": it holds a graph; graph attributes \
         (control flow: If, Loop, Scan) are not supported",
    );
    check(
        set(AttributeProto {
            graphs: vec![GraphProto::default()],
            ..attr_ints("bodies", &[])
        }),
        "node 1 (Relu), attribute \"bodies\": it holds a graph; graph attributes (control \
         flow: If, Loop, Scan) are not supported",
    );
    check(
        set(AttributeProto {
            r#type: Some(AttributeType::Graph as i32),
            ..attr_int("body", 0)
        }),
        "node 1 (Relu), attribute \"body\": its type is a graph; graph attributes (control \
         flow: If, Loop, Scan) are not supported",
    );
    check(
        set(AttributeProto {
            r#type: None,
            ..attr_int("axis", 1)
        }),
        "node 1 (Relu), attribute \"axis\": it has no type; IR version 2 and later require one",
    );
    check(
        set(AttributeProto {
            r#type: Some(AttributeType::Tensors as i32),
            ..attr_int("ts", 1)
        }),
        "node 1 (Relu), attribute \"ts\": its type TENSORS is not supported (FLOAT, INT, \
         STRING, TENSOR, FLOATS, INTS and STRINGS are)",
    );
    check(
        set(AttributeProto {
            r#type: Some(77),
            ..attr_int("odd", 1)
        }),
        "node 1 (Relu), attribute \"odd\": its type 77 is not an attribute type",
    );
    check(
        set(AttributeProto {
            t: None,
            ..attr_tensor("value", tensor("", FLOAT, &[]))
        }),
        "node 1 (Relu), attribute \"value\": its type is TENSOR but it holds no tensor",
    );
    check(
        set(attr_tensor(
            "value",
            TensorProto {
                int32_data: vec![1000],
                ..tensor("", INT8, &[1])
            },
        )),
        "node 1 (Relu), attribute \"value\": int32_data[0] = 1000 is out of the int8 range \
         -128 to 127",
    );
    check(
        set(AttributeProto {
            s: Some(vec![b'a', 0xff]),
            ..attr_string("mode", "")
        }),
        "node 1 (Relu), attribute \"mode\": its string is not UTF-8 (byte 1)",
    );
    check(
        set(AttributeProto {
            ref_attr_name: Some("alpha".into()),
            ..attr_float("alpha", 0.0)
        }),
        "node 1 (Relu), attribute \"alpha\": it refers to an attribute of a parent function \
         (ref_attr_name), which only a function body may do",
    );
    check(
        set(AttributeProto {
            name: None,
            ..attr_int("", 1)
        }),
        "node 1 (Relu), attribute \"\": an attribute has no name",
    );
    check(
        |m| graph(m).node[1].attribute = vec![attr_int("axis", 1), attr_int("axis", 2)],
        "node 1 (Relu), attribute \"axis\": it is given twice",
    );
}

#[test]
fn oversized_counts_and_names_are_refused() {
    let limits_message = |what: &str, count: usize, items: &str, limit: usize| {
        format!("{what}: {count} {items}, more than the {limit} this reader accepts")
    };
    check(
        |m| graph(m).node[1].input = vec![String::new(); 1025],
        &limits_message("node 1 (Relu)", 1025, "inputs", 1024),
    );
    check(
        |m| graph(m).node[1].output = vec![String::new(); 1025],
        &limits_message("node 1 (Relu)", 1025, "outputs", 1024),
    );
    check(
        |m| graph(m).node[1].attribute = (0..257).map(|i| attr_int(&format!("a{i}"), i)).collect(),
        &limits_message("node 1 (Relu)", 257, "attributes", 256),
    );
    check(
        |m| graph(m).node[1].attribute = vec![attr_ints("many", &vec![0; (1 << 16) + 1])],
        "node 1 (Relu), attribute \"many\": 65537 values, more than the 65536 this reader \
         accepts",
    );
    check(
        |m| {
            m.opset_import
                .extend((0..256).map(|i| opset(&format!("d{i}"), 1)))
        },
        &limits_message("the model", 257, "opset imports", 256),
    );
    check(
        |m| graph(m).node = vec![node("Relu", &[], &[]); (1 << 18) + 1],
        &limits_message("the graph", (1 << 18) + 1, "nodes", 1 << 18),
    );
    check(
        |m| graph(m).initializer = vec![tensor("t", FLOAT, &[0]); (1 << 18) + 1],
        &limits_message("the graph", (1 << 18) + 1, "initializers", 1 << 18),
    );
    check(
        |m| graph(m).input = vec![ValueInfoProto::default(); (1 << 16) + 1],
        &limits_message("the graph", (1 << 16) + 1, "inputs", 1 << 16),
    );
    // A long name is refused, and quoted cut to 64 characters.
    let long = "n".repeat(5000);
    check(
        |m| graph(m).node[1].name = Some(long.clone()),
        &format!(
            "node 1: name \"{}\"… (5000 bytes): 5000 bytes, longer than the 4096 this reader \
             accepts",
            "n".repeat(64)
        ),
    );
    check(
        |m| graph(m).node[1].attribute = vec![attr_string("mode", &"s".repeat((1 << 16) + 1))],
        "node 1 (Relu), attribute \"mode\": a string of 65537 bytes, longer than the 65536 \
         this reader accepts",
    );
    // Names within the limit but long are still quoted cut in messages.
    let message = error_of(&{
        let mut m = mlp();
        graph(&mut m).node[1].input[0] = "v".repeat(4000);
        m
    });
    assert!(message.len() < 200, "{message}");
    assert!(message.contains("… (4000 bytes)"), "{message}");
}
