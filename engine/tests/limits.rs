//! Every limit of `engine/src/limits.rs` (documented in docs/limits.md), tested at the limit and
//! one past it. Validation only: nothing here allocates the tensors it declares.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use cvm_engine::gas::Schedule;
use cvm_engine::limits::{MAX_GAS_PER_RUN, MAX_NODES, MAX_PEAK_MEMORY_BYTES, MAX_TENSOR_ELEMENTS};
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::{ErrorCode, ValidatedModel, ops};

fn input(name: &str, shape: Vec<u32>) -> InputDecl {
    InputDecl {
        name: name.into(),
        shape,
        precision: 8,
    }
}

fn node(name: String, op: &str, inputs: Vec<ValueRef>) -> Node {
    Node {
        name,
        op: ops::by_name(op).unwrap().code,
        inputs,
        attrs: Vec::new(),
    }
}

fn output(value: ValueRef) -> Vec<OutputDecl> {
    vec![OutputDecl {
        name: "out".into(),
        value,
    }]
}

/// Validates under schedule version 1, whose prices `model_with_gas` builds on.
fn verdict(model: &Model) -> Result<ValidatedModel, ErrorCode> {
    ValidatedModel::from_bytes(&model.encode(), &Schedule::V1).map_err(|e| e.code)
}

/// One relu over an input of `shape`.
fn relu_of(shape: Vec<u32>) -> Model {
    Model {
        inputs: vec![input("x", shape)],
        params: Vec::new(),
        nodes: vec![node("y".into(), "relu", vec![ValueRef::Input(0)])],
        outputs: output(ValueRef::Node { node: 0, output: 0 }),
    }
}

#[test]
fn tensor_elements() {
    let limit = MAX_TENSOR_ELEMENTS as u32;
    assert!(verdict(&relu_of(vec![limit])).is_ok());
    assert!(verdict(&relu_of(vec![2, limit / 2])).is_ok());
    assert_eq!(
        verdict(&relu_of(vec![limit + 1])).err(),
        Some(ErrorCode::LimitExceeded)
    );
    // Zero-element shapes are bounded by the product of their other dimensions too.
    assert!(verdict(&relu_of(vec![0, limit])).is_ok());
    assert_eq!(
        verdict(&relu_of(vec![0, limit + 1])).err(),
        Some(ErrorCode::LimitExceeded)
    );
    // Declared shapes of 2^30 elements and more.
    assert_eq!(
        verdict(&relu_of(vec![1 << 15, 1 << 15])).err(),
        Some(ErrorCode::LimitExceeded)
    );
    assert_eq!(
        verdict(&relu_of(vec![u32::MAX, u32::MAX, u32::MAX])).err(),
        Some(ErrorCode::LimitExceeded)
    );
    // An operator whose output would pass the limit is rejected at that node.
    let mut model = relu_of(vec![limit]);
    model.nodes.push(Node {
        attrs: vec![cvm_engine::model::Attr {
            name: "reps".into(),
            value: cvm_engine::model::AttrValue::Ints(vec![2]),
        }],
        ..node(
            "t".into(),
            "tile",
            vec![ValueRef::Node { node: 0, output: 0 }],
        )
    });
    model.outputs = output(ValueRef::Node { node: 1, output: 0 });
    let error = ValidatedModel::from_bytes(&model.encode(), &cvm_engine::gas::Schedule::V1)
        .err()
        .unwrap();
    assert_eq!(
        (error.code, error.node),
        (ErrorCode::LimitExceeded, Some(1))
    );
}

/// A chain of `n` relu nodes over a one-element input.
fn chain(n: usize) -> Model {
    let mut model = relu_of(vec![1]);
    model.nodes = (0..n)
        .map(|i| {
            let from = if i == 0 {
                ValueRef::Input(0)
            } else {
                ValueRef::Node {
                    node: i as u32 - 1,
                    output: 0,
                }
            };
            node(format!("n{i}"), "relu", vec![from])
        })
        .collect();
    model.outputs = output(ValueRef::Node {
        node: n as u32 - 1,
        output: 0,
    });
    model
}

#[test]
fn nodes_per_graph() {
    assert!(verdict(&chain(MAX_NODES)).is_ok());
    assert_eq!(
        verdict(&chain(MAX_NODES + 1)).err(),
        Some(ErrorCode::LimitExceeded)
    );
    assert_eq!(
        verdict(&chain(100_000)).err(),
        Some(ErrorCode::LimitExceeded)
    );
}

/// `x` of 2^26 elements, a chain of `length` relus over it (the first reads `x`, each other one
/// the one before), the last one the model output, and `extra` parameter elements. A run holds
/// `x`, the arena (the chain alternates between two buffers, one for a single relu), the
/// output's copy at the end, and the parameter: with n = 2^26, 4 · n · (1 + 2 + 1) + 4 · extra
/// bytes for a chain of two or more.
fn peak_model(length: usize, extra: u32) -> Model {
    let mut model = relu_of(vec![MAX_TENSOR_ELEMENTS as u32]);
    model.nodes = (0..length)
        .map(|i| {
            let from = match i {
                0 => ValueRef::Input(0),
                _ => ValueRef::Node {
                    node: i as u32 - 1,
                    output: 0,
                },
            };
            node(format!("r{i}"), "relu", vec![from])
        })
        .collect();
    model.outputs = output(ValueRef::Node {
        node: length as u32 - 1,
        output: 0,
    });
    if extra > 0 {
        model.params.push(ParamDecl {
            name: "p".into(),
            shape: vec![extra],
            precision: 8,
            data: ParamData::I8(vec![0; extra as usize]),
        });
    }
    model
}

#[test]
fn peak_memory() {
    // One tensor of 2^26 int32.
    let tensor = 4 * MAX_TENSOR_ELEMENTS;
    assert_eq!(4 * tensor, MAX_PEAK_MEMORY_BYTES);
    for length in [2, 64] {
        let exactly = verdict(&peak_model(length, 0)).unwrap();
        assert_eq!(exactly.arena_bytes, 2 * tensor);
        assert_eq!(exactly.peak_memory_bytes, MAX_PEAK_MEMORY_BYTES);
        // One more parameter element (4 bytes) is too many.
        let past = peak_model(length, 1);
        assert_eq!(verdict(&past).err(), Some(ErrorCode::MemoryLimit));
    }
    // A single relu needs one buffer, which leaves room for a parameter of 2^26 elements.
    let single = verdict(&peak_model(1, MAX_TENSOR_ELEMENTS as u32)).unwrap();
    assert_eq!(single.arena_bytes, tensor);
    assert_eq!(single.peak_memory_bytes, MAX_PEAK_MEMORY_BYTES);
    // Dead values give their elements to later ones: of 64 relus of x, the first is the model
    // output and the others, each dead after its own node, take turns in one more buffer.
    let mut model = peak_model(1, 0);
    model.nodes = (0..64)
        .map(|i| node(format!("r{i}"), "relu", vec![ValueRef::Input(0)]))
        .collect();
    let shared = verdict(&model).unwrap();
    assert_eq!(shared.arena_bytes, 2 * tensor);
    assert_eq!(shared.peak_memory_bytes, MAX_PEAK_MEMORY_BYTES);
    // Model outputs count twice at the end, in the arena and copied out: three relus of x kept
    // to the end need x, three buffers and three copies.
    model.nodes.truncate(3);
    model.outputs = (0..3)
        .map(|i| OutputDecl {
            name: format!("o{i}"),
            value: ValueRef::Node { node: i, output: 0 },
        })
        .collect();
    assert_eq!(verdict(&model).err(), Some(ErrorCode::MemoryLimit));
}

/// Elements of the input the nodes of [`erfs`] read: small enough that the inputs, the arena and
/// the output copy fit the memory limit, large enough that `MAX_GAS_PER_RUN` takes fewer than
/// `MAX_NODES` nodes.
const ELEMENTS: u64 = 1 << 12;

/// `nodes` CINN `Erf` nodes (a dear operator, so that `MAX_GAS_PER_RUN` takes few nodes) over x of
/// [`ELEMENTS`] elements, the last one the output.
fn erfs(nodes: u32) -> Model {
    Model {
        inputs: vec![input("x", vec![ELEMENTS as u32])],
        params: Vec::new(),
        nodes: (0..nodes)
            .map(|i| node(format!("e{i}"), "Erf", vec![ValueRef::Input(0)]))
            .collect(),
        outputs: output(ValueRef::Node {
            node: nodes - 1,
            output: 0,
        }),
    }
}

#[test]
fn gas_per_run() {
    // From two nodes on, each adds the same gas (the arena stays at two buffers): the most nodes
    // within the limit validate, one more is LimitExceeded.
    let two = verdict(&erfs(2)).unwrap();
    let each = two.nodes[1].gas;
    let most = 2 + (MAX_GAS_PER_RUN - two.total_gas) / each;
    let within = verdict(&erfs(most as u32)).unwrap();
    assert_eq!(within.total_gas, two.total_gas + (most - 2) * each);
    assert!(within.total_gas <= MAX_GAS_PER_RUN);
    assert!(within.total_gas + each > MAX_GAS_PER_RUN);
    assert!(within.peak_memory_bytes <= MAX_PEAK_MEMORY_BYTES);
    let past = erfs(most as u32 + 1);
    assert_eq!(verdict(&past).err(), Some(ErrorCode::LimitExceeded));
}

/// One generate_proposals_v2 node over N = 1 image of H = W = 1 and `anchors` anchors, every
/// anchor a candidate (`pre_nms_top_n` 2^31 − 1) and one box kept (`post_nms_top_n` 1).
fn proposals_of(anchors: u32) -> Model {
    let a = anchors;
    let attr = |name: &str, value: i64| Attr {
        name: name.into(),
        value: AttrValue::Int(value),
    };
    let mut proposals = node(
        "p".into(),
        "generate_proposals_v2",
        (0..5).map(ValueRef::Input).collect(),
    );
    proposals.attrs = vec![
        attr("post_nms_top_n", 1),
        attr("pre_nms_top_n", i64::from(i32::MAX)),
    ];
    Model {
        inputs: vec![
            input("scores", vec![1, 1, 1, a]),
            input("bbox_deltas", vec![1, 1, 1, 4 * a]),
            input("im_shape", vec![1, 2]),
            input("anchors", vec![1, 1, a, 4]),
            input("variances", vec![1, 1, a, 4]),
        ],
        params: Vec::new(),
        nodes: vec![proposals],
        outputs: output(ValueRef::Node { node: 0, output: 0 }),
    }
}

#[test]
fn peak_memory_counts_working_memory() {
    // Tensors: the inputs, 13 int32 per anchor and 2 for im_shape, and the arena of the outputs
    // (4 + 1 + 1 + 1 int32). Working memory: an 8-byte index per anchor, a 20-byte candidate per
    // anchor and the one kept candidate with its 16-byte area; it is gone when the outputs are
    // copied out (28 bytes, less than the working memory), so only the larger of the two
    // counts.
    let tensors = |a: u64| 4 * (13 * a + 2) + 4 * 7;
    let scratch = |a: u64| 8 * a + 20 * a + (20 + 16);
    let model = verdict(&proposals_of(1000)).unwrap();
    assert_eq!(model.arena_bytes, 4 * 7);
    assert_eq!(model.peak_memory_bytes, tensors(1000) + scratch(1000));
    // 14 million anchors: the tensors alone fit the limit, with the working memory they do not.
    let a = 14_000_000u64;
    assert!(tensors(a) <= MAX_PEAK_MEMORY_BYTES);
    assert!(tensors(a) + scratch(a) > MAX_PEAK_MEMORY_BYTES);
    assert_eq!(
        verdict(&proposals_of(14_000_000)).err(),
        Some(ErrorCode::MemoryLimit)
    );
    // The largest anchor count whose tensors and working memory fit passes the memory check;
    // one more fails it. The memory limit is checked before the gas total, and that many
    // anchors cost more than one run may (`gas_per_run`), so the count that fits stops there.
    let largest = (MAX_PEAK_MEMORY_BYTES - 8 - 28 - 40) / 80;
    assert_eq!(
        verdict(&proposals_of(u32::try_from(largest).unwrap())).err(),
        Some(ErrorCode::LimitExceeded)
    );
    assert_eq!(
        verdict(&proposals_of(u32::try_from(largest + 1).unwrap())).err(),
        Some(ErrorCode::MemoryLimit)
    );
}
