//! Tests of the executor: where the arena starts, metering, values sharing arena elements, and
//! the reply encoded from where a run left its outputs.

use alloc::vec;

use super::*;
use crate::model::{InputDecl, Model, Node, OutputDecl, ValueRef};
use crate::outcome::{OutputTensor, Status};

#[test]
fn the_arena_starts_half_a_page_after_the_largest_input() {
    const PAGE: usize = ARENA_SKEW_ELEMENTS * 4;
    let tensor = |n: usize| Tensor {
        shape: crate::tensor::Shape::new([n as u32]),
        precision: 8,
        data: vec![0; n],
    };
    let inputs = [tensor(3), tensor(1000), tensor(10)];
    let largest = inputs[1].data.as_ptr() as usize;
    for base in [0, 4, 2048, 4092, largest, largest + 8, 123_456] {
        let skew = arena_skew(base, &inputs);
        assert!(skew < ARENA_SKEW_ELEMENTS, "{skew}");
        let start = base + 4 * skew;
        assert_eq!(start.wrapping_sub(largest) % PAGE, PAGE / 2, "base {base}");
    }
    assert_eq!(arena_skew(4, &[]), 0);
}

/// A model of one input `x` of four 8-bit values and attribute-less nodes
/// `(name, operator, operands)`.
fn model_over_x(nodes: &[(&str, &str, Vec<ValueRef>)], outputs: &[(&str, ValueRef)]) -> Model {
    Model {
        inputs: vec![InputDecl {
            name: "x".into(),
            shape: vec![4],
            precision: 8,
        }],
        params: vec![],
        nodes: nodes
            .iter()
            .map(|(name, op_name, inputs)| Node {
                name: (*name).into(),
                op: op(op_name),
                inputs: inputs.clone(),
                attrs: vec![],
            })
            .collect(),
        outputs: outputs
            .iter()
            .map(|&(name, value)| OutputDecl {
                name: name.into(),
                value,
            })
            .collect(),
    }
}

/// `relu(relu(x))` on four values.
fn two_relus() -> ValidatedModel {
    let model = model_over_x(
        &[
            ("first", "relu", vec![ValueRef::Input(0)]),
            (
                "second",
                "relu",
                vec![ValueRef::Node { node: 0, output: 0 }],
            ),
        ],
        &[("y", ValueRef::Node { node: 1, output: 0 })],
    );
    ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1).unwrap()
}

fn input() -> Vec<InputTensor> {
    vec![InputTensor {
        shape: vec![4],
        data: vec![-3, 0, 5, -127],
    }]
}

#[test]
fn unmetered_runs_produce_the_metered_outputs_and_charge_nothing() {
    let model = two_relus();
    let metered = run(&model, input(), u64::MAX);
    assert_eq!(metered.outcome.gas_used, model.total_gas);
    let unmetered = run_unmetered(&model, input());
    assert_eq!(unmetered.outcome.gas_used, 0);
    assert_eq!(unmetered.outcome.status, metered.outcome.status);
    assert_eq!(unmetered.output_names, metered.output_names);
    let Status::Ok { outputs } = unmetered.outcome.status else {
        panic!("{unmetered:?}")
    };
    assert_eq!(outputs[0].data, [0, 0, 5, 0]);
}

#[test]
fn metered_runs_stop_at_the_first_charge_they_cannot_pay() {
    let model = two_relus();
    // The run's own gas comes first, without a node; then each node's.
    let report = run(&model, input(), model.run_gas - 1);
    assert_eq!(report.outcome.gas_used, 0);
    assert_eq!(
        report.outcome.status,
        Status::Error {
            code: crate::ErrorCode::OutOfGas.number(),
            node: None
        }
    );
    let first = model.run_gas + model.nodes[0].gas;
    let report = run(&model, input(), first);
    assert_eq!(report.outcome.gas_used, first);
    assert_eq!(
        report.outcome.status,
        Status::Error {
            code: crate::ErrorCode::OutOfGas.number(),
            node: Some(1)
        }
    );
    // Without a meter the same limit does not apply.
    let unmetered = run_unmetered(&model, input());
    assert!(matches!(unmetered.outcome.status, Status::Ok { .. }));
}

fn op(name: &str) -> u16 {
    crate::ops::by_name(name)
        .map(|op| op.code)
        .unwrap_or_default()
}

fn at(node: u32) -> ValueRef {
    ValueRef::Node { node, output: 0 }
}

/// Runs `model` the way the executor did before the arena: a fresh zeroed tensor for every
/// node output, nothing ever reused. The reference the arena executor must agree with.
fn run_separately(model: &ValidatedModel, inputs: Vec<InputTensor>) -> Vec<OutputTensor> {
    let mut values: Vec<Option<Tensor>> = vec![None; model.value_types.len()];
    for (id, input) in inputs.into_iter().enumerate() {
        values[id] = Some(Tensor {
            shape: crate::Shape::new(input.shape),
            precision: model.inputs[id].ty.precision,
            data: input.data,
        });
    }
    for (index, (_, param)) in model.params.iter().enumerate() {
        values[model.inputs.len() + index] = Some(param.clone());
    }
    for node in &model.nodes {
        let mut outputs: Vec<Tensor> = node
            .output_types
            .iter()
            .map(|ty| Tensor::zeroed(ty).unwrap())
            .collect();
        let operands: Vec<TensorRef<'_>> = node
            .inputs
            .iter()
            .map(|&id| values[id].as_ref().unwrap().view())
            .collect();
        let mut results: Vec<TensorMut<'_>> = outputs.iter_mut().map(Tensor::view_mut).collect();
        node.operator.run(&operands, &mut results).unwrap();
        drop(results);
        for (position, tensor) in outputs.into_iter().enumerate() {
            values[node.first_output + position] = Some(tensor);
        }
    }
    model
        .outputs
        .iter()
        .map(|&(_, id)| values[id].clone().unwrap().into())
        .collect()
}

fn outputs_of(report: Report) -> Vec<OutputTensor> {
    match report.outcome.status {
        Status::Ok { outputs } => outputs,
        status => panic!("{status:?}"),
    }
}

#[test]
fn values_sharing_arena_elements_compute_what_separate_buffers_do() {
    // a = relu(x), b = a + a, c = −b, d = c − a, e = |d|, f = e + x; a lives across three
    // nodes, b is read twice by one node and is a model output, as are x and f (twice).
    let model = model_over_x(
        &[
            ("a", "relu", vec![ValueRef::Input(0)]),
            ("b", "elemwise_add", vec![at(0), at(0)]),
            ("c", "negative", vec![at(1)]),
            ("d", "elemwise_sub", vec![at(2), at(0)]),
            ("e", "abs", vec![at(3)]),
            ("f", "elemwise_add", vec![at(4), ValueRef::Input(0)]),
        ],
        &[
            ("f", at(5)),
            ("b", at(1)),
            ("x", ValueRef::Input(0)),
            ("f again", at(5)),
        ],
    );
    let model = ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1).unwrap();
    // Six values of 16 bytes, in fewer: the plan makes them share elements.
    assert!(model.arena_bytes < 6 * 16, "{}", model.arena_bytes);
    let outputs = outputs_of(run(&model, input(), u64::MAX));
    let data: Vec<&[i32]> = outputs.iter().map(|tensor| &tensor.data[..]).collect();
    assert_eq!(
        data,
        [
            &[-3, 0, 20, -127][..],
            &[0, 0, 10, 0],
            &[-3, 0, 5, -127],
            &[-3, 0, 20, -127]
        ]
    );
    assert_eq!(outputs, run_separately(&model, input()));
}

/// A random graph over `x`, `y` (inputs) and `p` (a parameter), all of shape [n]: 1 to 40
/// elementwise nodes, whose operands are mostly recent values and sometimes any earlier
/// one; outputs: the last node, another random value, `x` and `p`.
fn random_model(seed: u64) -> (Model, Vec<InputTensor>) {
    let mut state = seed;
    let mut next = move |bound: u64| {
        // SplitMix64.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % bound
    };
    let n = 1 + next(9) as u32;
    let values = |next: &mut dyn FnMut(u64) -> u64| -> Vec<i32> {
        (0..n).map(|_| next(255) as i32 - 127).collect()
    };
    let inputs = vec![
        InputTensor {
            shape: vec![n],
            data: values(&mut next),
        },
        InputTensor {
            shape: vec![n],
            data: values(&mut next),
        },
    ];
    let mut model = Model {
        inputs: ["x", "y"]
            .iter()
            .map(|name| InputDecl {
                name: (*name).into(),
                shape: vec![n],
                precision: 8,
            })
            .collect(),
        params: vec![crate::model::ParamDecl {
            name: "p".into(),
            shape: vec![n],
            precision: 8,
            data: crate::model::ParamData::I8(values(&mut next).iter().map(|&v| v as i8).collect()),
        }],
        nodes: vec![],
        outputs: vec![],
    };
    // Every value with its precision: inputs, the parameter, then node outputs.
    let mut refs = vec![
        (ValueRef::Input(0), 8u8),
        (ValueRef::Input(1), 8),
        (ValueRef::Param(0), 8),
    ];
    for index in 0..1 + next(40) as u32 {
        let operand = |next: &mut dyn FnMut(u64) -> u64| {
            let window = if next(4) == 0 {
                refs.len()
            } else {
                refs.len().min(4)
            };
            refs[refs.len() - 1 - next(window as u64) as usize]
        };
        let (a, b) = (operand(&mut next), operand(&mut next));
        let (name, inputs, precision, attrs) = match next(6) {
            0 => ("relu", vec![a.0], a.1, vec![]),
            1 => ("negative", vec![a.0], a.1, vec![]),
            2 if a.1.max(b.1) < 24 => ("elemwise_add", vec![a.0, b.0], a.1.max(b.1) + 1, vec![]),
            3 if a.1.max(b.1) < 24 => ("elemwise_sub", vec![a.0, a.0], a.1 + 1, vec![]),
            4 if a.1 + b.1 < 24 => ("broadcast_mul", vec![a.0, b.0], a.1 + b.1, vec![]),
            _ => (
                "cvm_clip",
                vec![a.0],
                a.1.min(6),
                vec![crate::model::Attr {
                    name: "precision".into(),
                    value: crate::model::AttrValue::Int(6),
                }],
            ),
        };
        model.nodes.push(Node {
            name: alloc::format!("n{index}"),
            op: op(name),
            inputs,
            attrs,
        });
        refs.push((at(index), precision));
    }
    let last = refs.len() - 1;
    let other = next(refs.len() as u64) as usize;
    model.outputs = [("last", last), ("other", other), ("x", 0), ("p", 2)]
        .iter()
        .map(|&(name, index)| OutputDecl {
            name: name.into(),
            value: refs[index].0,
        })
        .collect();
    (model, inputs)
}

#[test]
fn random_graphs_compute_what_separate_buffers_do() {
    let (mut arena_bytes, mut output_bytes) = (0u64, 0u64);
    for seed in 0..200 {
        let (model, inputs) = random_model(seed);
        let model = ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1)
            .unwrap_or_else(|error| panic!("seed {seed}: {error:?}"));
        let expected = run_separately(&model, inputs.clone());
        let report = run(&model, inputs, u64::MAX);
        assert_eq!(report.outcome.gas_used, model.total_gas);
        assert_eq!(outputs_of(report), expected, "seed {seed}");
        arena_bytes += model.arena_bytes;
        output_bytes += model
            .nodes
            .iter()
            .flat_map(|node| &node.output_types)
            .map(|ty| 4 * ty.shape.elements())
            .sum::<u64>();
    }
    // The values do share elements: the arenas hold far less than all node outputs.
    assert!(
        3 * arena_bytes < output_bytes,
        "{arena_bytes} of {output_bytes}"
    );
}

#[test]
fn an_inconsistent_plan_fails_as_an_engine_bug() {
    let invalid_reference = |node| Status::Error {
        code: crate::ErrorCode::InvalidReference.number(),
        node: Some(node),
    };
    // The second relu's output on top of its input.
    let mut model = two_relus();
    model.arena_offsets = vec![0, 2];
    let report = run(&model, input(), u64::MAX);
    assert_eq!(report.outcome.status, invalid_reference(1));
    // An output past the end of the arena.
    model.arena_offsets = vec![0, 5];
    let report = run(&model, input(), u64::MAX);
    assert_eq!(report.outcome.status, invalid_reference(1));
    // The plan as validated runs.
    let mut model = two_relus();
    assert_eq!(model.arena_offsets, [0, 4]);
    assert_eq!(model.arena_bytes, 32);
    model.arena_offsets = vec![4, 0];
    assert!(matches!(
        run(&model, input(), u64::MAX).outcome.status,
        Status::Ok { .. }
    ));
}

#[test]
fn the_block_scan_finds_the_first_value_beyond_the_bound_as_a_plain_search() {
    let plain = |data: &[i32], bound: i64| {
        data.iter()
            .enumerate()
            .find(|&(_, &v)| i64::from(v).abs() > bound)
            .map(|(index, &v)| (index, v))
    };
    let mut state: u32 = 0x9E37_79B9;
    for len in [0usize, 1, 5, 63, 64, 65, 130, 1023, 1024, 1025, 3000] {
        for precision in [1u8, 2, 8, 16, 31, 32] {
            let bound = precision_bound(precision);
            for offender in [None, Some(0), Some(len / 2), Some(len.saturating_sub(1))] {
                let mut data: Vec<i32> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 17;
                        state ^= state << 5;
                        (i64::from(state) % (bound + 1)) as i32
                            * if state & 1 == 0 { 1 } else { -1 }
                    })
                    .collect();
                if let Some(at) = offender.filter(|&at| at < len) {
                    data[at] = if at % 2 == 0 {
                        i32::MIN
                    } else {
                        (bound + 1).min(i64::from(i32::MAX)) as i32
                    };
                }
                assert_eq!(
                    first_beyond(&data, bound),
                    plain(&data, bound),
                    "{len} {precision} {offender:?}"
                );
            }
        }
    }
}

#[test]
fn the_reply_is_the_encoding_of_the_report() {
    let same = |model: &ValidatedModel, inputs: Vec<InputTensor>, gas_limit: u64| {
        let report = run(model, inputs.clone(), gas_limit);
        assert_eq!(
            run_reply(model, inputs, gas_limit),
            borsh::to_vec(&report).unwrap(),
            "{report:?}"
        );
        report
    };
    // Outputs in the arena, listed inputs (twice: a copy, then the caller's tensor) and a
    // parameter, over random graphs.
    for seed in 0..100 {
        let (mut model, inputs) = random_model(seed);
        model.outputs.push(OutputDecl {
            name: "x again".into(),
            value: ValueRef::Input(0),
        });
        let model = ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1).unwrap();
        let report = same(&model, inputs, u64::MAX);
        assert!(matches!(report.outcome.status, Status::Ok { .. }), "{seed}");
    }
    // Failures: out of gas before and at a node, inputs of the wrong count, shape and
    // precision.
    let model = two_relus();
    same(&model, input(), model.run_gas - 1);
    same(&model, input(), model.run_gas + model.nodes[0].gas);
    same(&model, vec![], u64::MAX);
    let mut wrong = input();
    wrong[0].shape = vec![2, 2];
    same(&model, wrong, u64::MAX);
    let mut wrong = input();
    wrong[0].data[3] = 128;
    let report = same(&model, wrong, u64::MAX);
    assert_eq!(report.error_code(), Some(crate::ErrorCode::InputPrecision));
    // An output of several blocks of values, and a partial one.
    let mut model = model_over_x(
        &[("r", "relu", vec![ValueRef::Input(0)])],
        &[("y", ValueRef::Node { node: 0, output: 0 })],
    );
    let len = 3 * 4096 + 17;
    model.inputs[0].shape = vec![len];
    let model = ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1).unwrap();
    let data = (0..len as i32).map(|i| i % 255 - 127).collect();
    let inputs = vec![InputTensor {
        shape: vec![len],
        data,
    }];
    let report = same(&model, inputs, u64::MAX);
    assert!(matches!(report.outcome.status, Status::Ok { .. }));
}
