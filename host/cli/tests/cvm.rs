//! CVM models (`symbol` + `params`): every load check of cvm-compat §1–§2 with a malformed file,
//! legacy gas, and the `CVMAPIInference` byte contract through the CLI.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::Command;

use cvm_engine::ErrorCode;
use cvm_formats::cvm::{self, Class, params};
use serde_json::{Value, json};

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/cvm_dense")
}

fn example() -> (Value, Vec<u8>) {
    let symbol = std::fs::read(example_dir().join("symbol")).unwrap();
    (
        serde_json::from_slice(&symbol).unwrap(),
        std::fs::read(example_dir().join("params")).unwrap(),
    )
}

fn arrays() -> Vec<params::Array> {
    params::parse(&example().1).unwrap()
}

/// Imports a (possibly mutated) symbol with the given params; returns the error code, message
/// and the deployed runtime's class.
fn rejection(symbol: &Value, params_bytes: &[u8]) -> (ErrorCode, String, Class) {
    match cvm::import(symbol.to_string().as_bytes(), params_bytes) {
        Ok(_) => panic!("accepted: {symbol}"),
        Err(rejection) => (
            rejection.error.code,
            rejection.error.message,
            rejection.class,
        ),
    }
}

#[test]
fn the_compat_example_loads_runs_and_costs_185() {
    let (symbol, params_bytes) = example();
    let model = cvm::import(symbol.to_string().as_bytes(), &params_bytes).unwrap();
    assert_eq!(model.meta.legacy_gas, Ok(185));
    assert_eq!(model.meta.input_precision, 8);
    assert_eq!(model.meta.input_shape, [1, 4]);
    // Conversion is deterministic: the same files give the same canonical bytes.
    let again = cvm::import(symbol.to_string().as_bytes(), &params_bytes).unwrap();
    assert_eq!(model.model.encode(), again.model.encode());
    // Parameters keep their stored width (weight int8, bias int32).
    assert!(matches!(
        model.model.params[0].data,
        cvm_engine::model::ParamData::I8(_)
    ));
    assert!(matches!(
        model.model.params[1].data,
        cvm_engine::model::ParamData::I32(_)
    ));
}

#[test]
fn contract_sizes_follow_the_deployed_formulas() {
    let sizes = |symbol: &Value| {
        cvm::import(symbol.to_string().as_bytes(), &example().1)
            .unwrap()
            .meta
            .contract
    };
    let (mut symbol, _) = example();
    // data [1, 4] p8 in; shift0 [1, 3] p8 out; six entries with their own storage ids, of 4,
    // 12, 3, 3, 3 and 3 elements at 4 bytes each.
    let plain = sizes(&symbol);
    assert_eq!(
        (plain.input_length, plain.input_type_size),
        (4, 1),
        "{plain:?}"
    );
    assert_eq!((plain.output_length, plain.output_type_size), (3, 1));
    assert_eq!(plain.storage_size, 4 * (4 + 12 + 3 + 3 + 3 + 3));
    // Entries sharing a storage id share the largest of their sizes: ids 0 1 2 3 3 0 (relu0
    // writes in place, shift0 reuses data's id once dense0 has read it) give max(4, 3) + 12 + 3
    // + max(3, 3) elements.
    symbol["attrs"]["storage_id"] = json!(["list_int", [0, 1, 2, 3, 3, 0]]);
    assert_eq!(sizes(&symbol).storage_size, 4 * (4 + 12 + 3 + 3));
    // Argmax: one int32 per row.
    symbol["postprocess"] = json!("argmax");
    let argmax = sizes(&symbol);
    assert_eq!((argmax.output_length, argmax.output_type_size), (4, 4));
    // A head above 8 bits makes every output element int32: dense0 has precision 20.
    symbol["postprocess"] = json!("");
    symbol["attrs"]["storage_id"] = json!(["list_int", [0, 1, 2, 3, 4, 5]]);
    symbol["heads"] = json!([[3, 0, 0], [5, 0, 0]]);
    let wide = sizes(&symbol);
    assert_eq!((wide.output_length, wide.output_type_size), (24, 4));
}

/// Applies `mutate` to the example symbol and expects a rejection with `code`, `needle` and the
/// deployed runtime's `class`.
fn expect_symbol_rejected(
    mutate: impl FnOnce(&mut Value),
    code: ErrorCode,
    needle: &str,
    class: Class,
) {
    let (mut symbol, params_bytes) = example();
    mutate(&mut symbol);
    let (found, message, found_class) = rejection(&symbol, &params_bytes);
    assert_eq!(found, code, "{message}");
    assert_eq!(found_class, class, "{message}");
    assert!(
        message.contains(needle),
        "{message:?} should contain {needle:?}"
    );
}

/// Appends variables of the given shapes (precision 8, storage ids of their own) that no
/// operator reads to a cvm_1.0.0 graph whose head is its last node.
fn with_unused_variables(symbol: &mut Value, shapes: &[Value]) {
    for shape in shapes {
        let id = symbol["nodes"].as_array().unwrap().len();
        let entries = symbol["attrs"]["shape"][1].as_array().unwrap().len();
        symbol["nodes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"op": "null", "name": format!("unused{id}"), "inputs": []}));
        symbol["arg_nodes"].as_array_mut().unwrap().push(json!(id));
        symbol["node_row_ptr"]
            .as_array_mut()
            .unwrap()
            .push(json!(entries + 1));
        for (key, value) in [
            ("shape", shape.clone()),
            ("precision", json!(8)),
            ("storage_id", json!(100 + id)),
            ("dltype", json!("int32")),
        ] {
            symbol["attrs"][key][1].as_array_mut().unwrap().push(value);
        }
        symbol["attrs"]["op_attrs"][1]
            .as_array_mut()
            .unwrap()
            .push(json!("{}"));
    }
}

/// A change to the example symbol, the code it must be rejected with, a message fragment, and the
/// class of the deployed runtime's return code (`Runtime` for its `CHECK`, `LOG(FATAL)`, JSON and
/// parameter errors, `Logic` for its `VERIFY`s and where it has undefined behaviour).
type Mutation = (Box<dyn FnOnce(&mut Value)>, ErrorCode, &'static str, Class);

#[test]
fn every_symbol_check_rejects_a_malformed_graph() {
    use ErrorCode::*;
    let cases: Vec<Mutation> = vec![
        (
            Box::new(|s| {
                s["nodes"][4].as_object_mut().unwrap().remove("attrs");
            }),
            MalformedModel,
            "no attrs, so no operator",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["extra"] = json!(1)),
            MalformedModel,
            "unknown key \"extra\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["version"] = json!("cvm_2.0.0")),
            MalformedModel,
            "version \"cvm_2.0.0\" is not supported",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["postprocess"] = json!("x".repeat(32))),
            MalformedModel,
            "postprocess of 32 bytes",
            Class::Logic,
        ),
        (
            Box::new(|s| s["postprocess"] = json!(1)),
            MalformedModel,
            "postprocess 1 is not a string",
            Class::Runtime,
        ),
        (
            Box::new(|s| {
                s.as_object_mut().unwrap().remove("nodes");
            }),
            MalformedModel,
            "\"nodes\" is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][1] = json!(7)),
            MalformedModel,
            "node 1 must be an object",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][1]["param"] = json!({})),
            MalformedModel,
            "node 1: unknown key \"param\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| {
                s["nodes"][1].as_object_mut().unwrap().remove("name");
            }),
            MalformedModel,
            "node 1: \"name\" is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][4]["op"] = json!("tvm_op")),
            MalformedModel,
            "\"op\" must be \"null\" or \"cvm_op\"",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][1]["inputs"] = json!([[2, 0, 0]])),
            InvalidReference,
            "node 1 (\"dense0_weight\") reads entry (2, 0)",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["nodes"][4].as_object_mut().unwrap().remove("inputs");
            }),
            MalformedModel,
            "node 4 (\"relu0\"): \"inputs\" is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][1]["attrs"] = json!({"num_inputs": "0"})),
            MalformedModel,
            "node 1 (\"dense0_weight\"): attrs.func_name (the operator) is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][4]["attrs"]["num_inputs"] = json!(1)),
            MalformedModel,
            "attrs.num_inputs must be a string",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][4]["precision"] = json!("8")),
            MalformedModel,
            "\"precision\" is \"8\", not an integer",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][4]["inputs"] = json!([[3, 0, 4_294_967_296u64]])),
            MalformedModel,
            "4294967296 is not a 32-bit unsigned integer",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][4]["attrs"]["func_name"] = json!("Abs")),
            UnknownOp,
            "operator \"Abs\" is not known",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][4]["attrs"]["func_name"] = json!("generate_proposals_v2")),
            UnknownOp,
            "operator \"generate_proposals_v2\" is not known",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][4]["attrs"]["func_name"] = json!("_5")),
            UnknownOp,
            "operator \"_5\" is not known",
            Class::Runtime,
        ),
        (
            // dense is not on the in-place list: its output may not take data's storage.
            Box::new(|s| s["attrs"]["storage_id"][1][3] = json!(0)),
            MalformedModel,
            "operator dense writes output 0 into storage id 0 of its input (0, 0)",
            Class::Logic,
        ),
        (
            Box::new(|s| with_unused_variables(s, &[json!([1024, 1024, 1024]), json!([1024])])),
            LimitExceeded,
            "the storage plan needs 4294971504 bytes, more than 2^32",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["dtype"] = json!(["list_str", ["int32"]])),
            MalformedModel,
            "attrs.dtype must be",
            Class::Runtime,
        ),
        (
            Box::new(|s| {
                s["nodes"][4]["attrs"]
                    .as_object_mut()
                    .unwrap()
                    .remove("func_name");
            }),
            MalformedModel,
            "func_name (the operator) is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][4]["attrs"]["func_name"] = json!("softmax")),
            UnknownOp,
            "operator \"softmax\" is not known",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][4]["attrs"]["layout"] = json!("NCHW")),
            MalformedModel,
            "node 4 (\"relu0\") attrs: unknown key \"layout\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][4]["inputs"] = json!([[3]])),
            MalformedModel,
            "an entry has 2 or 3 numbers",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][4]["inputs"] = json!([[5, 0, 0]])),
            InvalidReference,
            "not in topological order",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][4]["inputs"] = json!([[3, 1, 0]])),
            InvalidReference,
            "reads entry (3, 1), which does not come before it",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s.as_object_mut().unwrap().remove("heads");
            }),
            MalformedModel,
            "\"heads\" is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["heads"] = json!([])),
            MalformedModel,
            "the graph has no outputs",
            Class::Logic,
        ),
        (
            Box::new(|s| s["heads"] = json!([[9, 0, 0]])),
            MalformedModel,
            "heads: entry (9, 0) does not exist",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s.as_object_mut().unwrap().remove("attrs");
            }),
            MalformedModel,
            "\"attrs\" is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["color"] = json!(["list_str", []])),
            MalformedModel,
            "attrs: unknown key \"color\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| {
                s["attrs"].as_object_mut().unwrap().remove("shape");
            }),
            MalformedModel,
            "attrs.shape is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["shape"] = json!(["list_int", []])),
            MalformedModel,
            "attrs.shape must be [\"list_shape\"",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["attrs"]["shape"][1].as_array_mut().unwrap().pop();
            }),
            MalformedModel,
            "attrs.shape has 5 values for 6 entries",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["shape"][1][2] = json!([])),
            LimitExceeded,
            "attrs.shape[2] has 0 dimensions",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["shape"][1][2] = json!([1, 1, 1, 1, 1, 1, 3])),
            LimitExceeded,
            "has 7 dimensions",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["shape"][1][2] = json!([0])),
            LimitExceeded,
            "has dimension 0",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["shape"][1][2] = json!([16777217])),
            LimitExceeded,
            "has dimension 16777217",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["shape"][1][2] = json!([65536, 65536])),
            LimitExceeded,
            "more than 2^30 elements",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["attrs"].as_object_mut().unwrap().remove("precision");
            }),
            MalformedModel,
            "attrs.precision is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["precision"][1][0] = json!(33)),
            InvalidPrecision,
            "attrs.precision[0] = 33",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["precision"][1][0] = json!(1e10)),
            MalformedModel,
            "attrs.precision[0] is not an integer",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["attrs"]["precision"][1][1] = json!(-1)),
            InvalidPrecision,
            "variable \"dense0_weight\" must declare a precision",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["attrs"].as_object_mut().unwrap().remove("storage_id");
            }),
            MalformedModel,
            "attrs.storage_id is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["storage_id"][1][3] = json!(-1)),
            MalformedModel,
            "attrs.storage_id holds -1",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["device_index"] = json!(["list_int", [1, 1, 1, 1, 1, 1]])),
            MalformedModel,
            "attrs.device_index must be empty (it has 6 values)",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["attrs"].as_object_mut().unwrap().remove("dltype");
            }),
            MalformedModel,
            "attrs.dltype is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["dltype"][1][4] = json!("float32")),
            MalformedModel,
            "attrs.dltype[4] = \"float32\"",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["attrs"].as_object_mut().unwrap().remove("op_attrs");
            }),
            MalformedModel,
            "attrs.op_attrs is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["attrs"]["op_attrs"][1].as_array_mut().unwrap().pop();
            }),
            MalformedModel,
            "attrs.op_attrs has 5 values for 6 nodes",
            Class::Logic,
        ),
        (
            Box::new(|s| s["attrs"]["op_attrs"][1][3] = json!("{units: 3}")),
            MalformedModel,
            "node 3 (\"dense0\"): attrs.op_attrs: at byte 2: expected '\"'",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["attrs"]["op_attrs"][1][3] = json!("{\"units\": 3}")),
            MalformedModel,
            "the value of \"units\" is 3, not a string",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["attrs"]["op_attrs"][1][3] = json!("{\"units\": \"three\"}")),
            AttributeType,
            "attribute \"units\" = \"three\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| {
                s["attrs"]["op_attrs"][1][3] = json!("{\"units\": \"3\", \"use_bias\": \"maybe\"}")
            }),
            AttributeType,
            "not a boolean",
            Class::Runtime,
        ),
        (
            Box::new(|s| {
                s.as_object_mut().unwrap().remove("node_row_ptr");
            }),
            MalformedModel,
            "reads entry (3, 0) through node_row_ptr [], past its arrays (undefined behaviour",
            Class::Logic,
        ),
        (
            Box::new(|s| s["node_row_ptr"] = json!([0, 1, 2, 3, 4, 5, 7])),
            MalformedModel,
            "node_row_ptr [0, 1, 2, 3, 4, 5, 7] does not match",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s.as_object_mut().unwrap().remove("arg_nodes");
            }),
            MalformedModel,
            "\"arg_nodes\" is missing",
            Class::Logic,
        ),
        (
            Box::new(|s| s["arg_nodes"] = json!([0, 1])),
            MalformedModel,
            "arg_nodes [0, 1] does not list the variables [0, 1, 2]",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][0]["name"] = json!("input")),
            MalformedModel,
            "no variable is named \"data\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["nodes"][2]["name"] = json!("data")),
            MalformedModel,
            "two variables are named \"data\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["attrs"]["shape"][1][3] = json!([1, 4])),
            ShapeMismatch,
            "node 3 (\"dense0\") output 0 is declared [1, 4], but dense computes [1, 3]",
            Class::Logic,
        ),
        (
            Box::new(|s| s["nodes"][2]["name"] = json!("dense0_weight")),
            MalformedModel,
            "two variables are named \"dense0_weight\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["attrs"]["op_attrs"][1][3] = json!("{\"use_bias\": \"true\"}")),
            MissingAttribute,
            "dense requires attribute \"units\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["attrs"]["op_attrs"][1][5] = json!("{\"precision\": \"8\"}")),
            MissingAttribute,
            "shift_bit",
            Class::Runtime,
        ),
    ];
    let total = cases.len();
    for (mutate, code, needle, class) in cases {
        expect_symbol_rejected(mutate, code, needle, class);
    }
    assert!(total >= 50);
}

/// What the deployed loader accepts and the engine must accept too.
#[test]
fn what_the_deployed_loader_accepts_loads() {
    let accepted = |mutate: &dyn Fn(&mut Value)| {
        let (mut symbol, params_bytes) = example();
        mutate(&mut symbol);
        cvm::import(symbol.to_string().as_bytes(), &params_bytes)
            .unwrap_or_else(|e| panic!("rejected: {e:?}\n{symbol}"))
    };
    // In-place operators may reuse an input's storage (relu, cvm_right_shift), and ids may be
    // shared by entries that do not meet.
    accepted(&|s| s["attrs"]["storage_id"] = json!(["list_int", [0, 1, 2, 3, 3, 3]]));
    accepted(&|s| s["attrs"]["storage_id"] = json!(["list_int", [0, 1, 2, 3, 0, 3]]));
    // The storage plan at its bound: 16 (data) + 48 (weight) + 12 (bias) + 12 (dense0, relu0
    // and shift0 sharing one id) + 4·(2^30 − 2^20) + 4·1048554 (two variables no operator reads)
    // = 2^32 bytes passes the plan check (the params then lack the two); one more element
    // exceeds it.
    for (extra, over) in [(1_048_554, false), (1_048_555, true)] {
        let (mut symbol, params_bytes) = example();
        symbol["attrs"]["storage_id"] = json!(["list_int", [0, 1, 2, 3, 3, 3]]);
        with_unused_variables(&mut symbol, &[json!([1024, 1024, 1023]), json!([extra])]);
        let (_, message, _) = rejection(&symbol, &params_bytes);
        assert_eq!(message.contains("storage plan"), over, "{message}");
    }
    // An empty device_index, a dtype list, node precisions, variable attrs with a func_name,
    // `num_inputs` and `op_attrs` keys, a `_` suffix with no digits.
    accepted(&|s| s["attrs"]["device_index"] = json!(["list_int", []]));
    accepted(&|s| s["attrs"]["dtype"] = json!(["list_int", [0, 0, 0, 0, 0, 0]]));
    accepted(&|s| s["attrs"]["dtype"] = json!(["list_str", 6]));
    accepted(&|s| s["nodes"][4]["precision"] = json!(8));
    accepted(&|s| s["nodes"][1]["attrs"] = json!({"func_name": "null", "num_inputs": "0"}));
    accepted(&|s| s["nodes"][4]["attrs"]["op_attrs"] = json!("{}"));
    accepted(&|s| s["nodes"][4]["attrs"]["func_name"] = json!("relu_"));
    // A variable's inputs are only checked for order.
    accepted(&|s| s["nodes"][1]["inputs"] = json!([[0, 0, 0]]));
    // An output index past a node's outputs reads the next entry: (2, 1) is entry 3, dense0.
    let model = accepted(&|s| s["nodes"][4]["inputs"] = json!([[2, 1, 0]]));
    let reference = accepted(&|_| {});
    assert_eq!(model.model.encode(), reference.model.encode());
    // Numbers as a C++ stream reads a `uint32_t`: a negative one wraps (an entry's version is
    // read and ignored; an output index of −1 names the entry before the node's first).
    let model = accepted(&|s| s["nodes"][4]["inputs"] = json!([[3, 0, -1]]));
    assert_eq!(model.model.encode(), reference.model.encode());
    let model = accepted(&|s| s["nodes"][4]["inputs"] = json!([[4, -1, 0]]));
    assert_eq!(model.model.encode(), reference.model.encode());
    let model = accepted(&|s| s["heads"] = json!([[4, 1, 0]]));
    assert_eq!(model.model.encode(), reference.model.encode());
    // Operator names need not be unique, nor differ from variables' names: a repeated one gets
    // the canonical name #<node id>, and the heads follow it.
    let model = accepted(&|s| {
        s["nodes"][5]["name"] = json!("relu0");
        s["nodes"][3]["name"] = json!("data");
    });
    let names: Vec<&str> = model.model.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["#3", "relu0", "#5"]);
    assert_eq!(model.model.outputs[0].name, "#5");
    let model = accepted(&|s| s["nodes"][4]["name"] = json!(""));
    assert_eq!(model.model.nodes[1].name, "#4");
    // The same entry twice among the heads: the second output gets the name #head1.
    let model = accepted(&|s| s["heads"] = json!([[5, 0, 0], [5, 0, 0]]));
    let names: Vec<&str> = model
        .model
        .outputs
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(names, ["shift0", "#head1"]);
    // Any postprocess string shorter than 32 bytes loads, with plain output unless it is
    // argmax or detection; CVMAPIGetPreprocessMethod reports it.
    let model = accepted(&|s| s["postprocess"] = json!("softmax"));
    assert_eq!(model.meta.postprocess, cvm::Postprocess::None);
    assert_eq!(model.meta.postprocess_name, "softmax");
    assert_eq!(model.meta.contract, reference.meta.contract);
    accepted(&|s| s["postprocess"] = json!("x".repeat(31)));
    // cvm_1.1.0 does not check dltype.
    accepted(&|s| {
        s["version"] = json!("cvm_1.1.0");
        s["attrs"]["dltype"] = json!(["list_str", ["float32"]]);
    });
}

#[test]
fn operator_checks_carry_the_deployed_return_code() {
    use ErrorCode::*;
    // Parameter declarations (lower bounds, unknown attributes) and the input shapes dense and
    // conv2d impose fail with a parameter error or `LOG(FATAL)` there (2); an attribute on an
    // operator without parameters, and the shape rules, with a `VERIFY` (1).
    let op_attrs = |dense: &'static str| {
        move |s: &mut Value| {
            s["attrs"]["op_attrs"][1][3] = json!(dense);
        }
    };
    let cases: Vec<Mutation> = vec![
        (
            Box::new(op_attrs(r#"{"units": "0"}"#)),
            AttributeOutOfRange,
            "\"units\" = 0 is below its lower bound 1",
            Class::Runtime,
        ),
        (
            Box::new(op_attrs(r#"{"units": "2"}"#)),
            ShapeMismatch,
            "the weight is declared [3, 4], dense needs [2, 4]",
            Class::Runtime,
        ),
        (
            Box::new(|s| {
                s["attrs"]["shape"][1][2] = json!([4]);
                s["attrs"]["shape"][1][1] = json!([3, 4]);
            }),
            ShapeMismatch,
            "the bias is declared [4], dense needs [3]",
            Class::Runtime,
        ),
        (
            Box::new(op_attrs(r#"{"units": "4294967299"}"#)),
            AttributeType,
            "not a 32-bit integer as the deployed parser reads one",
            Class::Runtime,
        ),
        (
            Box::new(op_attrs(r#"{"units": "3", "colour": "red"}"#)),
            UnknownAttribute,
            "dense has no attribute \"colour\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| s["attrs"]["op_attrs"][1][4] = json!(r#"{"alpha": "1"}"#)),
            UnknownAttribute,
            "relu has no attribute \"alpha\"",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["attrs"]["op_attrs"][1][5] = json!(r#"{"precision": "8", "shift_bit": "x"}"#)
            }),
            AttributeType,
            "attribute \"shift_bit\" = \"x\"",
            Class::Runtime,
        ),
        (
            Box::new(|s| {
                s["attrs"]["op_attrs"][1][5] = json!(r#"{"precision": "8", "shift_bit": "40"}"#)
            }),
            AttributeOutOfRange,
            "shift_bit",
            Class::Logic,
        ),
        (
            Box::new(|s| {
                s["nodes"][5]["attrs"]["func_name"] = json!("cvm_left_shift");
                s["attrs"]["op_attrs"][1][5] = json!(r#"{"precision": "32", "shift_bit": "20"}"#);
            }),
            PrecisionConstraint,
            "exceeds 32",
            Class::Runtime,
        ),
    ];
    for (mutate, code, needle, class) in cases {
        expect_symbol_rejected(mutate, code, needle, class);
    }
}

/// A CVM graph of variables (`null`, name, shape, precision) and single-output operators
/// (func_name, name, inputs, op_attrs, shape), in that order of nodes; the last node is the head.
fn graph(nodes: &[(&str, &str, &[usize], &str, Value)]) -> Value {
    let mut json_nodes = Vec::new();
    let (mut shapes, mut precisions, mut op_attrs, mut args) = (vec![], vec![], vec![], vec![]);
    for (id, (func, name, inputs, attrs, shape)) in nodes.iter().enumerate() {
        let inputs: Vec<Value> = inputs.iter().map(|&i| json!([i, 0, 0])).collect();
        if *func == "null" {
            json_nodes.push(json!({"op": "null", "name": name, "inputs": []}));
            precisions.push(json!(8));
            args.push(id);
        } else {
            json_nodes.push(json!({"op": "cvm_op", "name": name,
                "attrs": {"func_name": func}, "inputs": inputs}));
            precisions.push(json!(-1));
        }
        shapes.push(shape.clone());
        op_attrs.push(json!(attrs));
    }
    let n = nodes.len();
    json!({
        "nodes": json_nodes,
        "arg_nodes": args,
        "node_row_ptr": (0..=n).collect::<Vec<_>>(),
        "heads": [[n - 1, 0, 0]],
        "attrs": {
            "dltype": ["list_str", vec!["int32"; n]],
            "shape": ["list_shape", shapes],
            "precision": ["list_int", precisions],
            "storage_id": ["list_int", (0..n).collect::<Vec<_>>()],
            "op_attrs": ["list_str", op_attrs]
        }
    })
}

#[test]
fn aliases_pass_the_graph_checks_and_gas_but_do_not_load() {
    use cvm_formats::cvm::symbol;
    let add = |func: &str| {
        graph(&[
            ("null", "data", &[], "{}", json!([1, 4])),
            (func, "sum", &[0, 0], "{}", json!([1, 4])),
        ])
    };
    let reference = symbol::parse(add("broadcast_add").to_string().as_bytes()).unwrap();
    for alias in ["add", "add_3", "__add_symbol___1", "nn.relu"] {
        let text = if alias == "nn.relu" {
            graph(&[
                ("null", "data", &[], "{}", json!([1, 4])),
                (alias, "r", &[0], "{}", json!([1, 4])),
            ])
        } else {
            add(alias)
        }
        .to_string();
        // CVMAPIGetGasFromGraphFile counts the node as the operator it names.
        let parsed = symbol::parse(text.as_bytes()).unwrap();
        assert_eq!(cvm::legacy_gas(&parsed), cvm::legacy_gas(&reference));
        let (code, message, class) =
            rejection(&serde_json::from_str(&text).unwrap(), &params::write(&[]));
        assert_eq!(
            (code, class),
            (ErrorCode::UnknownOp, Class::Logic),
            "{message}"
        );
        assert!(message.contains("function undefined"), "{message}");
    }
    // "__add_symbol__" itself loses its last "_" to the suffix rule: no such operator.
    let (_, message, class) = rejection(&add("__add_symbol__"), &params::write(&[]));
    assert_eq!(class, Class::Runtime, "{message}");
}

#[test]
fn reshape_passes_over_codes_below_minus_4() {
    let reshape = |target: &str| {
        graph(&[
            ("null", "data", &[], "{}", json!([2, 3])),
            ("reshape", "r", &[0], target, json!([3, 2])),
        ])
    };
    let plain = cvm::import(
        reshape(r#"{"shape": "(3, 2)"}"#).to_string().as_bytes(),
        &params::write(&[]),
    )
    .unwrap();
    let skipped = cvm::import(
        reshape(r#"{"shape": "(-5, 3, -100, 2, -7)"}"#)
            .to_string()
            .as_bytes(),
        &params::write(&[]),
    )
    .unwrap();
    assert_eq!(skipped.model, plain.model);
    // The two sizes after a −4 are its arguments, checked as such, whatever their value.
    let (_, message, class) = rejection(
        &reshape(r#"{"shape": "(-4, -5, -6, 2)"}"#),
        &params::write(&[]),
    );
    assert_eq!(class, Class::Logic, "{message}");
}

#[test]
fn the_input_is_shaped_as_the_deployed_runtime_shapes_it() {
    // `data` after an operator: the deployed runtime sizes the input by entry 1 (the position
    // of `data` among the variables), here relu's (4), not data's (1, 4). The lengths agree,
    // the shapes do not: every inference fails there, and here.
    let symbol = graph(&[
        ("null", "w", &[], "{}", json!([4])),
        ("relu", "r", &[0], "{}", json!([4])),
        ("null", "data", &[], "{}", json!([1, 4])),
        ("broadcast_add", "y", &[2, 1], "{}", json!([1, 4])),
    ]);
    let w = params::Array {
        name: "w".into(),
        shape: vec![4],
        data: params::ArrayData::I8(vec![1, 2, 3, 4]),
    };
    let model = cvm::import(symbol.to_string().as_bytes(), &params::write(&[w])).unwrap();
    assert_eq!(model.meta.deployed_input_shape, [4]);
    assert_eq!(model.meta.contract.input_length, 4);
    let error = cvm::decode_input(&model.meta, &[1, 2, 3, 4], false).unwrap_err();
    assert!(error.message.contains("fails every inference"), "{error}");
    // With data first, its own shape.
    let (reference, params_bytes) = example();
    let reference = cvm::import(reference.to_string().as_bytes(), &params_bytes).unwrap();
    assert_eq!(
        reference.meta.deployed_input_shape,
        reference.meta.input_shape
    );
}

#[test]
fn data_type_and_layout_parameters_are_read_as_deployed() {
    // The reductions' `dtype` is read (a data type name, else a parameter error) and unused.
    let sum = |attrs: &'static str| {
        graph(&[
            ("null", "data", &[], "{}", json!([1, 4])),
            ("sum", "s", &[0], attrs, json!([1])),
        ])
    };
    let plain = cvm::import(sum("{}").to_string().as_bytes(), &params::write(&[])).unwrap();
    let typed = cvm::import(
        sum(r#"{"dtype": "float32"}"#).to_string().as_bytes(),
        &params::write(&[]),
    )
    .unwrap();
    assert_eq!(typed.model, plain.model);
    let (_, message, class) = rejection(&sum(r#"{"dtype": "int7"}"#), &params::write(&[]));
    assert_eq!(class, Class::Runtime, "{message}");
    assert!(message.contains("not a data type"), "{message}");
    // conv2d's `out_layout` is parsed as a layout (else a `CHECK`), then must be NCHW (a
    // `VERIFY`); `out_dtype` is a data type name or "same".
    for (attrs, class, needle) in [
        (
            r#""out_layout": """#,
            Class::Runtime,
            "not a layout: no axis",
        ),
        (r#""out_layout": "NCHH""#, Class::Runtime, "repeated"),
        (r#""out_layout": "NC8h""#, Class::Runtime, "missing axis H"),
        (r#""out_layout": "NHWC""#, Class::Logic, "out_layout"),
        (r#""out_dtype": "int7""#, Class::Runtime, "not a data type"),
        (r#""out_dtype": "float32""#, Class::Logic, "out_dtype"),
    ] {
        let symbol = conv_symbol(&conv_attrs(attrs));
        let (_, message, found) = rejection(&symbol, &conv_params());
        assert_eq!(found, class, "{attrs}: {message}");
        assert!(message.contains(needle), "{attrs}: {message}");
    }
    for attrs in [
        r#""out_layout": "__undef__""#,
        r#""out_layout": "NCHW""#,
        r#""out_dtype": "int32""#,
    ] {
        cvm::import(
            conv_symbol(&conv_attrs(attrs)).to_string().as_bytes(),
            &conv_params(),
        )
        .unwrap_or_else(|e| panic!("{attrs}: {e}"));
    }
}

/// The attributes of [`conv_symbol`]'s convolution with one more.
fn conv_attrs(extra: &str) -> String {
    format!(r#"{{"channels": "1", "kernel_size": "(2, 2)", "use_bias": "False", {extra}}}"#)
}

#[test]
fn the_conv2d_bias_is_assigned_after_its_verified_attributes() {
    // `channels` 3 with groups 2 fails the groups `VERIFY` (1) before the bias, declared for 4
    // channels, is assigned (`LOG(FATAL)`, 2); with `channels` 4 only the bias is wrong.
    let conv = |channels: &str, bias: u32| {
        graph(&[
            ("null", "data", &[], "{}", json!([1, 2, 3, 3])),
            ("null", "w", &[], "{}", json!([4, 1, 2, 2])),
            ("null", "b", &[], "{}", json!([bias])),
            (
                "conv2d",
                "c",
                &[0, 1, 2],
                if channels == "3" {
                    r#"{"channels": "3", "kernel_size": "(2, 2)", "groups": "2"}"#
                } else {
                    r#"{"channels": "4", "kernel_size": "(2, 2)", "groups": "2"}"#
                },
                json!([1, 4, 2, 2]),
            ),
        ])
    };
    let (_, message, class) = rejection(&conv("3", 4), &params::write(&[]));
    assert_eq!(class, Class::Logic, "{message}");
    let (_, message, class) = rejection(&conv("4", 5), &params::write(&[]));
    assert_eq!(class, Class::Runtime, "{message}");
    assert!(
        message.contains("the bias is declared [5], conv2d needs [4]"),
        "{message}"
    );
}

#[test]
fn max_over_the_whole_tensor_starts_from_zero_as_deployed() {
    // Both deployed backends reduce a `max` without axes from an accumulator of 0, so
    // all-negative data gives 0; with axes listed they start from the first value.
    let run = |attrs: &'static str, output_shape: Value| {
        let symbol = graph(&[
            ("null", "data", &[], "{}", json!([1, 4])),
            ("max", "m", &[0], attrs, output_shape),
        ]);
        let model = cvm::import(symbol.to_string().as_bytes(), &params::write(&[])).unwrap();
        let report = cvm_engine::run(
            &cvm_engine::load(&model.model.encode(), 1).unwrap(),
            vec![cvm_engine::InputTensor {
                shape: vec![1, 4],
                data: vec![-3, -1, -2, -5],
            }],
            u64::MAX,
        );
        let cvm_engine::Status::Ok { outputs } = report.outcome.status else {
            panic!("{report:?}")
        };
        (model.model, outputs[0].data.clone())
    };
    let (model, data) = run("{}", json!([1]));
    assert_eq!(data, [0]);
    let names: Vec<&str> = model.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["m", "#1.floor"]);
    assert_eq!(model.outputs[0].name, "m");
    assert_eq!(run(r#"{"axis": "()"}"#, json!([1])).1, [0]);
    assert_eq!(run(r#"{"axis": "(0, 1)"}"#, json!([1])).1, [-1]);
    assert_eq!(run(r#"{"axis": "(1,)"}"#, json!([1])).1, [-1]);
    assert_eq!(
        run(r#"{"axis": "(0,)", "exclude": "true"}"#, json!([1])).1,
        [-1]
    );
}

#[test]
fn the_gas_of_a_graph_takes_the_set_up_checks_only() {
    // CVMAPIGetGasFromGraphFile sets the graph up (reading, the graph checks, attribute parsing,
    // shape and precision inference) and counts; it never builds a model, so the heads, the
    // `data` variable and the size of the memory plan are not checked.
    let gas = |mutate: &dyn Fn(&mut Value)| {
        let (mut symbol, _) = example();
        mutate(&mut symbol);
        cvm::graph_gas(symbol.to_string().as_bytes())
    };
    assert_eq!(gas(&|_| {}), Ok(185));
    assert_eq!(gas(&|s| s["heads"] = json!([])), Ok(185));
    assert_eq!(gas(&|s| s["heads"] = json!([[9, 0, 0]])), Ok(185));
    assert_eq!(gas(&|s| s["nodes"][0]["name"] = json!("input")), Ok(185));
    assert!(
        gas(&|s| with_unused_variables(s, &[json!([1024, 1024, 1024]), json!([1024])])).is_ok()
    );
    // A shape the operators do not infer fails as it fails a load.
    let error = gas(&|s| s["attrs"]["shape"][1][3] = json!([1, 4])).unwrap_err();
    assert_eq!(error.class, Class::Logic);
    assert!(
        error.error.message.contains("dense computes [1, 3]"),
        "{error}"
    );
    let error = gas(&|s| s["attrs"]["op_attrs"][1][3] = json!(r#"{"units": "x"}"#)).unwrap_err();
    assert_eq!(error.class, Class::Runtime);
}

#[test]
fn the_graph_checks_accept_their_bounds() {
    // The accept side of the shape and precision bounds (their reject side is in
    // `every_symbol_check_rejects_a_malformed_graph`): a dimension of 2^24, 2^30 elements, 6
    // dimensions, precision 32, on variables no operator reads, through the checks of setting
    // the graph up (the engine's own tensor limit is lower: docs/limits.md).
    let (mut symbol, _) = example();
    with_unused_variables(
        &mut symbol,
        &[json!([16_777_216, 64]), json!([1, 1, 1, 1, 1, 1])],
    );
    symbol["attrs"]["precision"][1][6] = json!(32);
    let base = cvm::graph_gas(example().0.to_string().as_bytes()).unwrap();
    let gas = cvm::graph_gas(symbol.to_string().as_bytes()).unwrap();
    assert_eq!(gas, base + 5 * (1 << 30) + 5);
}

#[test]
fn a_model_over_the_legacy_gas_limits_loads() {
    // 16384 batches of 64 boxes through get_valid_counts and non_max_suppression: the legacy
    // operation count 20 · 16384 · (16384 · 64 · 6) exceeds 2^40. The deployed runtime checks
    // the limits only when asked for the gas (CVMAPIGetGasFromModel, ..FromGraphFile), so the
    // model loads and runs there; its gas is the error.
    let (b, n) = (16_384, 64);
    let symbol = json!({
        "nodes": [
            {"op": "null", "name": "data", "inputs": []},
            {"op": "cvm_op", "name": "valid", "attrs": {"func_name": "get_valid_counts"},
             "inputs": [[0, 0, 0]]},
            {"op": "cvm_op", "name": "nms", "attrs": {"func_name": "non_max_suppression"},
             "inputs": [[1, 1, 0], [1, 0, 0]]}
        ],
        "arg_nodes": [0],
        "node_row_ptr": [0, 1, 3, 4],
        "heads": [[2, 0, 0]],
        "attrs": {
            "dltype": ["list_str", ["int32", "int32", "int32", "int32"]],
            "shape": ["list_shape", [[b, n, 6], [b], [b, n, 6], [b, n, 6]]],
            "precision": ["list_int", [8, -1, -1, -1]],
            "storage_id": ["list_int", [0, 1, 2, 3]],
            "op_attrs": ["list_str", ["{}", "{}", "{}"]]
        }
    });
    let model = cvm::import(symbol.to_string().as_bytes(), &params::write(&[])).unwrap();
    let error = model.meta.legacy_gas.unwrap_err();
    assert_eq!(error.code, ErrorCode::LimitExceeded);
    assert!(error.message.contains("operations exceed 2^40"), "{error}");
}

#[test]
fn a_memory_plan_that_overwrites_a_live_value_is_rejected() {
    // The deployed runtime computes in the plan: an entry written over one still to be read
    // makes it compute with the overwritten value. Parameters, loaded once and read at every
    // inference, keep their storage to themselves.
    for (ids, heads, needle) in [
        // The weight shares data's storage: data is written over it at every inference.
        (
            json!([0, 0, 1, 2, 3, 4]),
            json!([[5, 0, 0]]),
            "writes entry 0 (\"data\") into storage id 0 while entry 1 (\"dense0_weight\")",
        ),
        // Two parameters share: the bias, loaded after the weight, replaces it.
        (
            json!([0, 1, 1, 2, 3, 4]),
            json!([[5, 0, 0]]),
            "writes entry 2 (\"dense0_bias\") into storage id 1 while entry 1",
        ),
        // relu0 writes in place over dense0, which is also an output.
        (
            json!([0, 1, 2, 3, 3, 4]),
            json!([[3, 0, 0], [5, 0, 0]]),
            "writes entry 4 (\"relu0\") into storage id 3 while entry 3 (\"dense0\")",
        ),
    ] {
        let (mut symbol, params_bytes) = example();
        symbol["attrs"]["storage_id"] = json!(["list_int", ids]);
        symbol["heads"] = heads;
        let (_, message, class) = rejection(&symbol, &params_bytes);
        assert_eq!(class, Class::Logic, "{message}");
        assert!(message.contains(needle), "{message}");
        assert!(
            message.contains("computes with the overwritten value"),
            "{message}"
        );
    }
}

#[test]
fn parameter_names_the_canonical_model_cannot_hold_are_renamed() {
    // The deployed loader asks only that variables differ: an empty name and one of 300 bytes
    // load, matched to their arrays by those names, and become #<node id> in the canonical model.
    let long = "w".repeat(300);
    let (mut symbol, _) = example();
    symbol["nodes"][1]["name"] = json!("");
    symbol["nodes"][2]["name"] = json!(long);
    let mut arrays = arrays();
    arrays[0].name = String::new();
    arrays[1].name = long.clone();
    let params_bytes = params::write(&arrays);
    let model = cvm::import(symbol.to_string().as_bytes(), &params_bytes).unwrap();
    let names: Vec<&str> = model.model.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["#1", "#2"]);
    let (reference_symbol, reference_params) = example();
    let reference =
        cvm::import(reference_symbol.to_string().as_bytes(), &reference_params).unwrap();
    let input = cvm::decode_input(&reference.meta, &[1, 2, 3, 4], false).unwrap();
    let run = |model: &cvm_engine::model::Model| {
        let loaded = cvm_engine::load(&model.encode(), 1).unwrap();
        cvm_engine::run(&loaded, vec![input.clone()], u64::MAX).outcome
    };
    assert_eq!(run(&model.model), run(&reference.model));
    // Still two variables may not share a name, however long.
    symbol["nodes"][1]["name"] = json!(long);
    let (_, message, _) = rejection(&symbol, &params_bytes);
    assert!(message.contains("two variables are named"), "{message}");
}

/// A one-layer convolution as a CVM graph: data (1, 1, 3, 3), weight (1, 1, 2, 2), no bias.
fn conv_symbol(attrs: &str) -> Value {
    json!({
        "nodes": [
            {"op": "null", "name": "data", "inputs": []},
            {"op": "null", "name": "w", "inputs": []},
            {"op": "cvm_op", "name": "conv", "attrs": {"func_name": "conv2d"}, "inputs": [[0, 0], [1, 0]]},
        ],
        "arg_nodes": [0, 1],
        "node_row_ptr": [0, 1, 2, 3],
        "heads": [[2, 0]],
        "attrs": {
            "dltype": ["list_str", ["int32", "int32", "int32"]],
            "shape": ["list_shape", [[1, 1, 3, 3], [1, 1, 2, 2], [1, 1, 2, 2]]],
            "precision": ["list_int", [8, 8, -1]],
            "storage_id": ["list_int", [0, 1, 2]],
            "op_attrs": ["list_str", ["{}", "{}", attrs]],
        },
    })
}

fn conv_params() -> Vec<u8> {
    params::write(&[params::Array {
        name: "w".into(),
        shape: vec![1, 1, 2, 2],
        data: params::ArrayData::I8(vec![1, 0, 0, 1]),
    }])
}

#[test]
fn conv2d_needs_channels_and_kernel_size() {
    let full = r#"{"channels": "1", "kernel_size": "(2, 2)", "use_bias": "False"}"#;
    cvm::import(conv_symbol(full).to_string().as_bytes(), &conv_params()).unwrap();
    for (attrs, missing) in [
        (
            r#"{"kernel_size": "(2, 2)", "use_bias": "False"}"#,
            "channels",
        ),
        (r#"{"channels": "1", "use_bias": "False"}"#, "kernel_size"),
    ] {
        let (code, message, _) = rejection(&conv_symbol(attrs), &conv_params());
        assert_eq!(code, ErrorCode::MissingAttribute, "{message}");
        assert!(
            message.contains(&format!("requires attribute \"{missing}\"")),
            "{message}"
        );
    }
}

#[test]
fn where_with_a_row_condition_is_undefined() {
    let symbol = |cond_shape: Value| {
        json!({
            "nodes": [
                {"op": "null", "name": "data", "inputs": []},
                {"op": "null", "name": "c", "inputs": []},
                {"op": "null", "name": "y", "inputs": []},
                {"op": "cvm_op", "name": "sel", "attrs": {"func_name": "where"}, "inputs": [[1, 0], [0, 0], [2, 0]]},
            ],
            "arg_nodes": [0, 1, 2],
            "node_row_ptr": [0, 1, 2, 3, 4],
            "heads": [[3, 0]],
            "attrs": {
                "dltype": ["list_str", ["int32", "int32", "int32", "int32"]],
                "shape": ["list_shape", [[2, 2], cond_shape, [2, 2], [2, 2]]],
                "precision": ["list_int", [8, 8, 8, -1]],
                "storage_id": ["list_int", [0, 1, 2, 3]],
                "op_attrs": ["list_str", ["{}", "{}", "{}", "{}"]],
            },
        })
    };
    let array = |name: &str, shape: Vec<i64>, data: Vec<i8>| params::Array {
        name: name.into(),
        shape,
        data: params::ArrayData::I8(data),
    };
    let same = params::write(&[
        array("c", vec![2, 2], vec![1, 0, 0, 1]),
        array("y", vec![2, 2], vec![0; 4]),
    ]);
    cvm::import(symbol(json!([2, 2])).to_string().as_bytes(), &same).unwrap();
    let rows = params::write(&[
        array("c", vec![2], vec![1, 0]),
        array("y", vec![2, 2], vec![0; 4]),
    ]);
    let (code, message, _) = rejection(&symbol(json!([2])), &rows);
    assert_eq!(code, ErrorCode::ShapeMismatch, "{message}");
    assert!(message.contains("undefined behaviour"), "{message}");
}

#[test]
fn params_are_set_one_by_one_as_deployed() {
    let (symbol, _) = example();
    let load =
        |list: &[params::Array]| cvm::import(symbol.to_string().as_bytes(), &params::write(list));
    // An array named `data` is checked for its shape, then the input replaces it.
    let mut list = arrays();
    list.push(params::Array {
        name: "data".into(),
        shape: vec![1, 4],
        data: params::ArrayData::I8(vec![127, 127, 127, 127]),
    });
    let with_data = load(&list).unwrap();
    assert_eq!(
        with_data.model.encode(),
        load(&arrays()).unwrap().model.encode()
    );
    list.last_mut().unwrap().shape = vec![4, 1];
    let error = load(&list).unwrap_err();
    assert_eq!(error.error.code, ErrorCode::ShapeMismatch, "{error:?}");
    // A name given twice: both are checked, the last wins.
    let mut list = arrays();
    let mut bias = list[1].clone();
    bias.data = params::ArrayData::I32(vec![1, 2, 3]);
    list.push(bias.clone());
    let model = load(&list).unwrap();
    assert_eq!(
        model.model.params[1].data,
        cvm_engine::model::ParamData::I32(vec![1, 2, 3])
    );
    let mut list = arrays();
    bias.data = params::ArrayData::I32(vec![1, 2, 300]);
    list.insert(0, bias);
    assert_eq!(load(&list).unwrap_err().error.code, ErrorCode::InvalidParam);
}

#[test]
fn version_1_1_recomputes_row_pointers_and_takes_no_dltype() {
    let (mut symbol, params_bytes) = example();
    symbol["version"] = json!("cvm_1.1.0");
    // Row pointers that do not match the nodes are replaced (after the in-place check has read
    // them, within bounds here).
    symbol["node_row_ptr"] = json!([0, 1, 2, 3, 4, 5, 7]);
    symbol.as_object_mut().unwrap().remove("arg_nodes");
    symbol["attrs"].as_object_mut().unwrap().remove("dltype");
    let model = cvm::import(symbol.to_string().as_bytes(), &params_bytes).unwrap();
    assert_eq!(model.meta.version, cvm::Version::V1_1);
    assert_eq!(model.meta.legacy_gas, Ok(185));
    // Without row pointers, the in-place check of an operator off its list (dense) reads an
    // empty array: the deployed loader crashes (cvm-compat §6). A graph of in-place operators
    // only never reads it and loads.
    let mut without_rows = symbol.clone();
    without_rows.as_object_mut().unwrap().remove("node_row_ptr");
    let (_, message, class) = rejection(&without_rows, &params_bytes);
    assert_eq!(class, Class::Logic, "{message}");
    assert!(message.contains("undefined behaviour"), "{message}");
    let relu_only = json!({
        "version": "cvm_1.1.0",
        "nodes": [
            {"op": "null", "name": "data", "inputs": []},
            {"op": "cvm_op", "name": "r", "attrs": {"func_name": "relu"}, "inputs": [[0, 0]]}
        ],
        "heads": [[1, 0]],
        "attrs": {
            "shape": ["list_shape", [[1, 4], [1, 4]]],
            "precision": ["list_int", [8, -1]],
            "storage_id": ["list_int", [0, 0]],
            "op_attrs": ["list_str", ["{}", "{}"]]
        }
    });
    cvm::import(relu_only.to_string().as_bytes(), &params::write(&[])).unwrap();

    // Names are checked for repeats only among the nodes arg_nodes lists: unlisted, two
    // parameters of one name fail when the second is never loaded (1), two `data` variables
    // leave the second unwritten (undefined: rejected, 1); listed, they stop the loader (2).
    // The params hold the weight alone, so that nothing else is wrong with the renamed graph.
    let weight_only = params::write(&arrays()[..1]);
    let renamed = |name: &str, listed: Option<Value>| {
        let mut copy = symbol.clone();
        copy["nodes"][2]["name"] = json!(name);
        if let Some(listed) = listed {
            copy["arg_nodes"] = listed;
        }
        rejection(&copy, &weight_only)
    };
    let (_, message, class) = renamed("dense0_weight", None);
    assert_eq!(class, Class::Logic, "{message}");
    assert!(message.contains("loads only the first"), "{message}");
    let (_, message, class) = renamed("data", None);
    assert_eq!(class, Class::Logic, "{message}");
    assert!(message.contains("undefined behaviour"), "{message}");
    let (_, message, class) = renamed("dense0_weight", Some(json!([1, 2])));
    assert_eq!(class, Class::Runtime, "{message}");
    assert!(message.contains("two variables are named"), "{message}");
    let (_, message, class) = renamed("dense0_bias", Some(json!([0, 9])));
    assert_eq!(class, Class::Logic, "{message}");
    assert!(message.contains("reads past its nodes"), "{message}");
}

#[test]
fn data_may_stand_at_any_position() {
    let (mut symbol, params_bytes) = example();
    // Move `data` after the parameters: nodes [w, b, data, dense, relu, shift].
    let nodes = symbol["nodes"].as_array_mut().unwrap();
    nodes.swap(0, 2);
    nodes.swap(0, 1);
    symbol["nodes"][3]["inputs"] = json!([[2, 0, 0], [0, 0, 0], [1, 0, 0]]);
    symbol["attrs"]["shape"][1] = json!([[3, 4], [3], [1, 4], [1, 3], [1, 3], [1, 3]]);
    let model = cvm::import(symbol.to_string().as_bytes(), &params_bytes).unwrap();
    assert_eq!(model.model.inputs[0].name, "data");
    let report = cvm_engine::run(
        &cvm_engine::load(&model.model.encode(), 1).unwrap(),
        vec![cvm_engine::InputTensor {
            shape: vec![1, 4],
            data: vec![1, 2, 3, 4],
        }],
        u64::MAX,
    );
    let cvm_engine::Status::Ok { outputs } = report.outcome.status else {
        panic!("{report:?}")
    };
    assert_eq!(outputs[0].data, [0, 26, 68]);
}

fn expect_params_rejected(bytes: &[u8], code: ErrorCode, needle: &str, class: Class) {
    let (symbol, _) = example();
    let (found, message, found_class) = rejection(&symbol, bytes);
    assert_eq!(found, code, "{message}");
    assert_eq!(found_class, class, "{message}");
    assert!(
        message.contains(needle),
        "{message:?} should contain {needle:?}"
    );
}

#[test]
fn every_params_check_rejects_a_malformed_file() {
    use ErrorCode::*;
    let good = params::write(&arrays());
    let mut bad_magic = good.clone();
    bad_magic[0] ^= 1;
    expect_params_rejected(&bad_magic, MalformedModel, "list magic", Class::Logic);
    let mut huge_names = good.clone();
    huge_names[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    expect_params_rejected(
        &huge_names,
        MalformedModel,
        "the number of names",
        Class::Logic,
    );
    let mut non_utf8 = good.clone();
    non_utf8[32] = 0xff; // first byte of the first name
    // Its bytes name no variable: a `LOG(FATAL)` there as here (the message shows the byte 0xff
    // as the character that stands for it, U+10FFFF, escaped).
    expect_params_rejected(
        &non_utf8,
        MalformedModel,
        "\"\\u{10ffff}ense0_weight\" is not a variable of the graph",
        Class::Runtime,
    );
    // Bytes after the last array are never read.
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"anything");
    cvm::import(example().0.to_string().as_bytes(), &trailing).unwrap();
    // The last array cut short: nothing of its data is a `CHECK` failure, part of it leaves the
    // rest uninitialised there (undefined).
    let bias_bytes = 3 * 4;
    expect_params_rejected(
        &good[..good.len() - bias_bytes],
        MalformedModel,
        "truncated reading the data",
        Class::Runtime,
    );
    expect_params_rejected(
        &good[..good.len() - 1],
        MalformedModel,
        "undefined behaviour",
        Class::Logic,
    );

    // Field-level corruption of the first array, located after the names.
    let names_end = 24 + 8 + "dense0_weight".len() + 8 + "dense0_bias".len();
    let array = names_end + 8; // after n_arrays
    let corrupt = |offset: usize, bytes: &[u8]| {
        let mut copy = good.clone();
        copy[offset..offset + bytes.len()].copy_from_slice(bytes);
        copy
    };
    expect_params_rejected(
        &corrupt(names_end, &3u64.to_le_bytes()),
        MalformedModel,
        "3 arrays for 2 names",
        Class::Logic,
    );
    expect_params_rejected(
        &corrupt(array, &[0; 8]),
        MalformedModel,
        "parameter \"dense0_weight\": array magic",
        Class::Runtime,
    );
    expect_params_rejected(
        &corrupt(array + 16, &2i32.to_le_bytes()),
        MalformedModel,
        "device type 2 is not 1",
        Class::Runtime,
    );
    // ndim 7 reads the data size and data as dimensions: the data size `CHECK` fails. A
    // well-formed array of 7 dimensions fails the shape `VERIFY` of setting it; a negative
    // ndim sizes a vector past its maximum (`length_error`, class 1).
    expect_params_rejected(
        &corrupt(array + 24, &7i32.to_le_bytes()),
        MalformedModel,
        "does not match shape [3, 4, 12,",
        Class::Runtime,
    );
    let mut list = arrays();
    list[0].shape = vec![3, 4, 1, 1, 1, 1, 1];
    expect_params_rejected(
        &params::write(&list),
        ShapeMismatch,
        "has shape [3, 4, 1, 1, 1, 1, 1], the graph declares [3, 4]",
        Class::Logic,
    );
    expect_params_rejected(
        &corrupt(array + 24, &(-1i32).to_le_bytes()),
        MalformedModel,
        "ndim -1 is negative",
        Class::Logic,
    );
    expect_params_rejected(
        &corrupt(array + 28, &[2]),
        MalformedModel,
        "(code 2, 8 bits, 1 lanes) is not int8 or int32",
        Class::Logic,
    );
    // 16-bit values of a 12-byte array: the data size `CHECK` comes first.
    expect_params_rejected(
        &corrupt(array + 29, &[16]),
        MalformedModel,
        "of 16-bit values",
        Class::Runtime,
    );
    expect_params_rejected(
        &corrupt(array + 30, &2u16.to_le_bytes()),
        MalformedModel,
        "2 lanes",
        Class::Logic,
    );
    expect_params_rejected(
        &corrupt(array + 29, &[12]),
        MalformedModel,
        "cannot be allocated",
        Class::Runtime,
    );
    expect_params_rejected(
        &corrupt(array + 30, &0u16.to_le_bytes()),
        MalformedModel,
        "cannot be allocated",
        Class::Runtime,
    );
    expect_params_rejected(
        &corrupt(array + 16, &3i32.to_le_bytes()),
        MalformedModel,
        "device type 3 is not 1",
        Class::Logic,
    );
    expect_params_rejected(
        &corrupt(array + 48, &13i64.to_le_bytes()),
        MalformedModel,
        "data size 13 does not match shape [3, 4]",
        Class::Runtime,
    );

    // Semantic checks against the graph.
    let mut list = arrays();
    list[0].name = "conv_weight".into();
    expect_params_rejected(
        &params::write(&list),
        MalformedModel,
        "\"conv_weight\" is not a variable of the graph",
        Class::Runtime,
    );
    let list = vec![arrays().remove(0)];
    expect_params_rejected(
        &params::write(&list),
        MalformedModel,
        "parameter \"dense0_bias\" of the graph is missing",
        Class::Logic,
    );
    let mut list = arrays();
    list[1].shape = vec![1, 3];
    expect_params_rejected(
        &params::write(&list),
        ShapeMismatch,
        "has shape [1, 3], the graph declares [3]",
        Class::Logic,
    );
    let mut list = arrays();
    list[1].data = params::ArrayData::I32(vec![-20, 5, 128]);
    expect_params_rejected(
        &params::write(&list),
        InvalidParam,
        "value 128 at index 2 exceeds precision 8",
        Class::Logic,
    );
}

#[test]
fn no_truncation_or_corruption_panics() {
    let (symbol, good) = example();
    let text = symbol.to_string().into_bytes();
    for len in 0..good.len() {
        assert!(
            cvm::import(&text, &good[..len]).is_err(),
            "params truncated at {len} accepted"
        );
    }
    // The deployed reader takes the end of the input for the closing brackets it still
    // expects: a graph cut among its final brackets, or before its last key (`version`, whose
    // value is the default), loads as the whole one; every other cut fails.
    let whole = cvm::import(&text, &good).unwrap();
    let mut loaded = Vec::new();
    for len in 0..text.len() {
        if let Ok(model) = cvm::import(&text[..len], &good) {
            assert_eq!(model, whole, "symbol cut at {len}");
            loaded.push(len);
        }
    }
    let version = text.len() - ",\"version\":\"cvm_1.0.0\"}".len();
    assert_eq!(&text[version..version + 10], b",\"version\"");
    let closing = |len: usize| text[len..version].iter().all(|b| b"}]".contains(b));
    let expected: Vec<usize> = (0..text.len())
        .filter(|&len| len == text.len() - 1 || (len <= version && closing(len)))
        .collect();
    assert_eq!(loaded, expected);
    let mut state = 0x51ed_27a1_0b0e_55c3u64;
    for _ in 0..2000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut params_copy = good.clone();
        let bit = (state % (params_copy.len() as u64 * 8)) as usize;
        params_copy[bit / 8] ^= 1 << (bit % 8);
        let _ = cvm::import(&text, &params_copy);
        let mut text_copy = text.clone();
        let bit = ((state >> 20) % (text_copy.len() as u64 * 8)) as usize;
        text_copy[bit / 8] ^= 1 << (bit % 8);
        let _ = cvm::import(&text_copy, &good);
    }
}

// ---------- The byte contract through the CLI ----------

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cvm-contract-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Writes a CVM model directory from a symbol and params.
fn model_dir(name: &str, symbol: &Value, params_bytes: &[u8]) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("symbol"), symbol.to_string()).unwrap();
    std::fs::write(dir.join("params"), params_bytes).unwrap();
    dir
}

fn cvm_cli(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn run_cvm_bytes(dir: &Path, input: &[u8], extra: &[&str]) -> (Vec<u8>, Value) {
    let input_path = scratch(&format!(
        "{}.in",
        dir.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&input_path, input).unwrap();
    let output_path = scratch(&format!(
        "{}.out",
        dir.file_name().unwrap().to_string_lossy()
    ));
    let mut args = vec![
        "run",
        dir.to_str().unwrap(),
        "--engine",
        "native",
        "--input-format",
        "cvm",
        "--input",
        input_path.to_str().unwrap(),
        "--output-format",
        "cvm",
        "--output",
        output_path.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let (status, stdout, stderr) = cvm_cli(&args);
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    let json: Value = serde_json::from_str(stdout.trim()).unwrap();
    let bytes = std::fs::read(&output_path).unwrap();
    assert_eq!(
        json["output_cvm_hex"].as_str().unwrap(),
        cvm_runtime::hash::hex(&bytes)
    );
    (bytes, json)
}

#[test]
fn int8_bytes_round_trip_and_estimate_reports_legacy_gas() {
    let (status, stdout, _) = cvm_cli(&["estimate", example_dir().to_str().unwrap(), "--json"]);
    assert_eq!(status, Some(0));
    let estimate: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(estimate["legacy_gas"], 185);
    // The digits network: 26,098,686 by GetOps worked over its symbol (docs/cvm.md).
    let digits = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/digits");
    let (status, stdout, _) = cvm_cli(&["estimate", digits.to_str().unwrap(), "--json"]);
    assert_eq!(status, Some(0), "{stdout}");
    let estimate: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(estimate["legacy_gas"], 26_098_686);
    let (status, stdout, _) = cvm_cli(&[
        "estimate",
        "--cvm-symbol",
        example_dir().join("symbol").to_str().unwrap(),
        "--cvm-params",
        example_dir().join("params").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(status, Some(0));
    assert!(stdout.contains("\"legacy_gas\":185"), "{stdout}");

    // Precision 8 in and out: one byte per element; −128 is clipped to −127 on entry.
    let (bytes, json) = run_cvm_bytes(&example_dir(), &[1, 2, 3, 4], &[]);
    assert_eq!(bytes, [0, 26, 68]);
    assert_eq!(json["outputs"][0]["data"], json!([0, 26, 68]));
    let (_, clipped) = run_cvm_bytes(&example_dir(), &[0x80, 0, 0, 0], &[]);
    let (_, explicit) = run_cvm_bytes(&example_dir(), &[0x81, 0, 0, 0], &[]);
    assert_eq!(clipped["hash"], explicit["hash"], "−128 enters as −127");

    // A wrong byte length is a deterministic error of the run, hashed, naming the expected size.
    let short = scratch("short.in");
    std::fs::write(&short, [1, 2, 3]).unwrap();
    let (status, stdout, _) = cvm_cli(&[
        "run",
        example_dir().to_str().unwrap(),
        "--input-format",
        "cvm",
        "--input",
        short.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(status, Some(1), "{stdout}");
    let json: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(json["error"]["code"], "MalformedInput");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must be 4 bytes"),
        "{json}"
    );
    assert_eq!(json["hash"].as_str().map(str::len), Some(64));
}

#[test]
fn int32_bytes_in_both_byte_orders_and_argmax() {
    let (mut symbol, params_bytes) = example();
    // Input precision 9 makes the input int32, and the dense input limit then rejects it; keep
    // the graph valid by feeding a 16-bit input through cvm_clip first.
    symbol["nodes"] = json!([
        {"op": "null", "name": "data", "inputs": []},
        {"op": "null", "name": "dense0_weight", "inputs": []},
        {"op": "null", "name": "dense0_bias", "inputs": []},
        {"op": "cvm_op", "name": "clip0", "attrs": {"func_name": "cvm_clip"}, "inputs": [[0, 0, 0]]},
        {"op": "cvm_op", "name": "dense0", "attrs": {"func_name": "dense"}, "inputs": [[3, 0, 0], [1, 0, 0], [2, 0, 0]]},
    ]);
    symbol["arg_nodes"] = json!([0, 1, 2]);
    symbol["node_row_ptr"] = json!([0, 1, 2, 3, 4, 5]);
    symbol["heads"] = json!([[4, 0, 0]]);
    symbol["attrs"] = json!({
        "dltype": ["list_str", ["int32", "int32", "int32", "int32", "int32"]],
        "shape": ["list_shape", [[1, 4], [3, 4], [3], [1, 4], [1, 3]]],
        "precision": ["list_int", [16, 8, 8, -1, -1]],
        "storage_id": ["list_int", [0, 1, 2, 3, 4]],
        "op_attrs": ["list_str", ["{}", "{}", "{}", "{\"precision\": \"8\"}", "{\"units\": \"3\", \"use_bias\": \"1\"}"]],
    });
    let dir = model_dir("int32_model", &symbol, &params_bytes);
    let little: Vec<u8> = [1i32, 2, 300, -4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let big: Vec<u8> = [1i32, 2, 300, -4]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    // clip(300) = 127: dense = [1+0+381-4-20, 5-12+889-32+5, 12-2+1270+4+100] = [358, 855, 1384].
    let (le_bytes, le_json) = run_cvm_bytes(&dir, &little, &[]);
    assert_eq!(le_json["outputs"][0]["data"], json!([358, 855, 1384]));
    assert_eq!(
        le_bytes,
        [358i32, 855, 1384]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
    let (be_bytes, be_json) = run_cvm_bytes(&dir, &big, &["--big-endian"]);
    assert_eq!(be_json["hash"], le_json["hash"]);
    assert_eq!(
        be_bytes,
        [358i32, 855, 1384]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect::<Vec<_>>()
    );

    symbol["postprocess"] = json!("argmax");
    let dir = model_dir("argmax_model", &symbol, &params_bytes);
    let (bytes, _) = run_cvm_bytes(&dir, &little, &[]);
    assert_eq!(bytes, 2i32.to_le_bytes(), "argmax of [358, 855, 1384] is 2");
    let (bytes, _) = run_cvm_bytes(&dir, &big, &["--big-endian"]);
    assert_eq!(bytes, 2i32.to_be_bytes());
}

#[test]
fn two_head_detection_output_interleaves_rows() {
    let (mut symbol, params_bytes) = example();
    symbol["heads"] = json!([[3, 0, 0], [5, 0, 0]]);
    symbol["postprocess"] = json!("detection");
    let dir = model_dir("detection_model", &symbol, &params_bytes);
    let (bytes, json) = run_cvm_bytes(&dir, &[1, 2, 3, 4], &["--big-endian"]);
    // One row per head: dense0 [-6, 51, 136] then shift0 [0, 26, 68], as int32.
    let expected: Vec<u8> = [-6i32, 51, 136, 0, 26, 68]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    assert_eq!(bytes, expected);
    assert_eq!(json["outputs"].as_array().unwrap().len(), 2);

    // Without post-processing, two heads still interleave; dense0 has precision 20, so int32.
    symbol["postprocess"] = json!("");
    let dir = model_dir("two_heads_model", &symbol, &params_bytes);
    let (bytes, _) = run_cvm_bytes(&dir, &[1, 2, 3, 4], &[]);
    let expected: Vec<u8> = [-6i32, 51, 136, 0, 26, 68]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(bytes, expected);
}

/// Runs a CVM model on raw bytes and expects a deterministic error of the run (status 1).
fn run_fails(dir: &Path, input: &[u8], code: &str, needle: &str) {
    let input_path = scratch(&format!(
        "{}.bad.in",
        dir.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&input_path, input).unwrap();
    let (status, stdout, stderr) = cvm_cli(&[
        "run",
        dir.to_str().unwrap(),
        "--input-format",
        "cvm",
        "--input",
        input_path.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(status, Some(1), "{stdout}{stderr}");
    let json: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(json["error"]["code"], code, "{json}");
    let message = json["error"]["message"].as_str().unwrap();
    assert!(message.contains(needle), "{message}");
    assert_eq!(json["hash"].as_str().map(str::len), Some(64));
}

#[test]
fn outputs_the_deployed_runtime_cannot_lay_out_fail_the_run() {
    let (mut symbol, params_bytes) = example();
    // A single detection head cannot be interleaved.
    symbol["postprocess"] = json!("detection");
    let dir = model_dir("single_detection", &symbol, &params_bytes);
    run_fails(
        &dir,
        &[1, 2, 3, 4],
        "ShapeMismatch",
        "needs more than one head",
    );
    // Heads with different row counts: dense0 [1, 3] and the weight [3, 4].
    symbol["postprocess"] = json!("");
    symbol["heads"] = json!([[3, 0, 0], [1, 0, 0]]);
    let dir = model_dir("unequal_rows", &symbol, &params_bytes);
    run_fails(&dir, &[1, 2, 3, 4], "ShapeMismatch", "row counts [1, 3]");
    // argmax over the (3, 4) weight: three rows of four, only the first written as deployed.
    symbol["postprocess"] = json!("argmax");
    symbol["heads"] = json!([[5, 0, 0], [1, 0, 0]]);
    let dir = model_dir("argmax_rows", &symbol, &params_bytes);
    run_fails(&dir, &[1, 2, 3, 4], "ShapeMismatch", "undefined behaviour");
    // The input length is checked first.
    run_fails(&dir, &[1, 2], "MalformedInput", "must be 4 bytes");
    // argmax over one-row heads is fine.
    symbol["heads"] = json!([[5, 0, 0], [3, 0, 0]]);
    let dir = model_dir("argmax_two_heads", &symbol, &params_bytes);
    let (bytes, _) = run_cvm_bytes(&dir, &[1, 2, 3, 4], &[]);
    // shift0 [0, 26, 68] → 2; dense0 [-6, 51, 136]: int8(136) = −120, so 51 wins → 1.
    assert_eq!(bytes, [2, 0, 0, 0, 1, 0, 0, 0]);
}

#[test]
fn a_rejected_cvm_model_is_a_deterministic_error() {
    let (mut symbol, params_bytes) = example();
    symbol["nodes"][4]["attrs"]["func_name"] = json!("softmax");
    let dir = model_dir("unknown_op_model", &symbol, &params_bytes);
    let (status, stdout, _) = cvm_cli(&[
        "run",
        dir.to_str().unwrap(),
        "--input-format",
        "cvm",
        "--input",
        "/dev/null",
        "--json",
    ]);
    assert_eq!(status, Some(1));
    let json: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(json["error"]["code"], "UnknownOp");
    assert_eq!(json["error"]["node"], "relu0");
    assert_eq!(json["hash"].as_str().map(str::len), Some(64));
    let out = scratch("never.cvm");
    let (status, _, _) = cvm_cli(&["import", dir.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(status, Some(1));
    assert!(!out.exists());
    let (status, stdout, _) = cvm_cli(&[
        "import",
        example_dir().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(status, Some(0), "{stdout}");
    let (status, stdout, _) = cvm_cli(&[
        "run",
        out.to_str().unwrap(),
        "--input",
        &format!("data={}", scratch("x.npy").display()),
        "--json",
    ]);
    assert_eq!(status, Some(2), "{stdout}");
}

/// Hostile strings of a megabyte (an operator name, a top-level key, the version, a node name, a
/// parameter name) are quoted in messages as a bounded prefix.
#[test]
fn messages_quote_a_bounded_prefix_of_hostile_strings() {
    let huge = "N".repeat(1 << 20);
    let (symbol, params_bytes) = example();
    type Edit<'a> = Box<dyn Fn(&mut Value) + 'a>;
    let mutations: Vec<Edit> = vec![
        Box::new(|s| s["nodes"][3]["attrs"]["func_name"] = huge.clone().into()),
        Box::new(|s| s[huge.as_str()] = json!(1)),
        Box::new(|s| s["version"] = huge.clone().into()),
        Box::new(|s| {
            s["nodes"][3]["name"] = huge.clone().into();
            s["attrs"]["op_attrs"][1][3] = json!("{\"units\": \"three\"}");
        }),
        Box::new(|s| s["attrs"]["op_attrs"][1][3] = format!("{{\"{huge}\": 1}}").into()),
        Box::new(|s| s["attrs"]["op_attrs"][1][3] = format!("{{\"{huge}\": \"1\"}}").into()),
        Box::new(|s| s["attrs"]["op_attrs"][1][3] = format!("{{\"units\": \"{huge}\"}}").into()),
    ];
    for (index, mutate) in mutations.iter().enumerate() {
        let mut mutated = symbol.clone();
        mutate(&mut mutated);
        let Err(rejection) = cvm::import(mutated.to_string().as_bytes(), &params_bytes) else {
            panic!("mutation {index} is accepted");
        };
        let message = rejection.error.message;
        assert!(
            message.len() < 1024,
            "{} bytes: {}",
            message.len(),
            message.chars().take(300).collect::<String>()
        );
    }
}

/// A dimension the reader does not take as an integer is named as such, not as "null".
#[test]
fn a_fractional_dimension_is_named_as_not_an_integer() {
    let (symbol, params_bytes) = example();
    let text = symbol.to_string().replacen("[1,4]", "[1.5,4]", 1);
    assert_ne!(text, symbol.to_string(), "the example declares [1,4]");
    let Err(rejection) = cvm::import(text.as_bytes(), &params_bytes) else {
        panic!("accepted");
    };
    assert!(
        rejection.error.message.contains(
            "attrs.shape[0] has a dimension that is not a 64-bit integer (a fraction, an exponent"
        ),
        "{}",
        rejection.error.message
    );
    assert_eq!(rejection.class, Class::Runtime);
}
