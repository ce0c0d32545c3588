//! Tests of the trace's bytes and of one node run alone.

use alloc::vec;
use alloc::vec::Vec;

use super::*;
use crate::model::{InputDecl, Model, Node, OutputDecl, ValueRef};
use crate::outcome::{OutputTensor, Report};

/// `y = relu(x)`, `z = add(y, x)`, `w = relu(z)` on four 8-bit values.
fn three_nodes() -> ValidatedModel {
    let op = |name: &str| {
        crate::ops::by_name(name)
            .map(|op| op.code)
            .unwrap_or_default()
    };
    let at = |node: u32| ValueRef::Node { node, output: 0 };
    let node = |name: &str, op_name: &str, inputs: Vec<ValueRef>| Node {
        name: name.into(),
        op: op(op_name),
        inputs,
        attrs: vec![],
    };
    let model = Model {
        inputs: vec![InputDecl {
            name: "x".into(),
            shape: vec![4],
            precision: 8,
        }],
        params: vec![],
        nodes: vec![
            node("y", "relu", vec![ValueRef::Input(0)]),
            node("z", "elemwise_add", vec![at(0), ValueRef::Input(0)]),
            node("w", "relu", vec![at(1)]),
        ],
        outputs: vec![OutputDecl {
            name: "w".into(),
            value: at(2),
        }],
    };
    ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1).unwrap()
}

fn input() -> Vec<InputTensor> {
    vec![InputTensor {
        shape: vec![4],
        data: vec![-3, 0, 5, -127],
    }]
}

/// The trace decoded: per node, its index, gas so far and outputs.
fn decoded(trace: &[u8]) -> Vec<(u32, u64, Vec<OutputTensor>)> {
    borsh::from_slice(trace).unwrap()
}

#[test]
fn the_trace_holds_every_node_output_and_the_reply_is_the_untraced_one() {
    let model = three_nodes();
    let (reply, trace) = run_trace_reply(&model, input(), u64::MAX).unwrap();
    assert_eq!(reply, crate::exec::run_reply(&model, input(), u64::MAX));
    assert_eq!(trace.len() as u64, trace_bytes(&model).unwrap());
    let nodes = decoded(&trace);
    let values: Vec<Vec<i32>> = nodes
        .iter()
        .map(|(_, _, outputs)| outputs[0].data.clone())
        .collect();
    assert_eq!(
        values,
        [vec![0, 0, 5, 0], vec![-3, 0, 10, -127], vec![0, 0, 10, 0]]
    );
    let mut gas = model.run_gas;
    for (index, (node, gas_used, outputs)) in nodes.iter().enumerate() {
        gas += model.nodes[index].gas;
        assert_eq!((*node as usize, *gas_used), (index, gas));
        assert_eq!(outputs[0].shape, [4]);
        assert_eq!(
            outputs[0].precision,
            model.nodes[index].output_types[0].precision
        );
    }
}

#[test]
fn a_failed_run_traces_the_nodes_that_completed() {
    let model = three_nodes();
    let limit = model.run_gas + model.nodes[0].gas + model.nodes[1].gas;
    let (reply, trace) = run_trace_reply(&model, input(), limit).unwrap();
    let report: Report = borsh::from_slice(&reply).unwrap();
    assert_eq!(report, crate::exec::run(&model, input(), limit));
    assert_eq!(decoded(&trace).len(), 2);
}

#[test]
fn a_node_run_alone_gives_its_outputs_in_the_run() {
    let model = three_nodes();
    let (_, trace) = run_trace_reply(&model, input(), u64::MAX).unwrap();
    let nodes = decoded(&trace);
    let alone = run_node(
        &model,
        1,
        vec![
            InputTensor {
                shape: vec![4],
                data: nodes[0].2[0].data.clone(),
            },
            input().remove(0),
        ],
    )
    .unwrap();
    assert_eq!(alone.gas, model.nodes[1].gas);
    assert_eq!(OutputTensor::from(alone.outputs[0].clone()), nodes[1].2[0]);
}

#[test]
fn wrong_operands_of_a_node_run_alone_are_typed_errors() {
    let model = three_nodes();
    let code = |node, operands| run_node(&model, node, operands).unwrap_err().code;
    let tensor = |shape: Vec<u32>, data: Vec<i32>| InputTensor { shape, data };
    assert_eq!(code(3, vec![]), crate::ErrorCode::InvalidReference);
    assert_eq!(code(0, vec![]), crate::ErrorCode::InputCount);
    assert_eq!(
        code(0, vec![tensor(vec![3], vec![0; 3])]),
        crate::ErrorCode::InputShape
    );
    assert_eq!(
        code(0, vec![tensor(vec![4], vec![0; 3])]),
        crate::ErrorCode::InputShape
    );
    assert_eq!(
        code(0, vec![tensor(vec![4], vec![0, 0, 128, 0])]),
        crate::ErrorCode::InputPrecision
    );
    let error = run_node(&model, 0, vec![]).unwrap_err();
    assert_eq!(error.node, Some(0));
}
