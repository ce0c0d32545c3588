//! Schedule version 1 stays calibrated in fuel: for one model per kernel path and shape class,
//! the wasm fuel a node burns per unit of its gas lies within [0.5, 2] of the calibration's
//! median node fuel per gas, 6.310 (`docs/gas-calibration.md`).
//!
//! Fuel repeats exactly, so this test fails whenever a kernel or a usage formula changes enough
//! to move a path out of the band, long before anyone reruns the calibration tool. Each node's
//! fuel is isolated as the tool does it, by difference: the model with two more copies of the
//! node (their outputs unused) less the model with one, which cancels decoding the inputs and
//! encoding the report. The second copy's output takes the elements of the first's, dead by
//! then, so the two models have the same arena: the first copy adds arena, which run gas prices
//! and whose zeroing wasmtime charges as fuel per byte. The node's gas is the copy's gas in the
//! static estimate. `cargo test -p cvm-cli --test gas_calibration --
//! --nocapture` prints the table.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::Path;

use cvm_cli::runner::encode_inputs;
use cvm_engine::exec::InputTensor;
use cvm_runtime::wasm::WasmEngine;
use serde_json::{Value, json};

/// The schedule under test.
const SCHEDULE: u32 = 1;
/// Median fuel per gas of the calibration, in thousandths.
const MEDIAN_MILLI_FUEL: u64 = 6_310;

/// One node to measure: its operator, attributes, the model input and parameters it reads.
struct Case {
    label: &'static str,
    op: &'static str,
    attrs: Value,
    /// (shape, precision, values) of the model input `x`.
    input: (Vec<u32>, u8, Vec<i32>),
    /// (name, shape, precision, values) of each parameter, read after `x`.
    params: Vec<(&'static str, Vec<u32>, u8, Vec<i32>)>,
}

/// A reproducible sequence of values in [lo, hi].
fn values(n: usize, lo: i64, hi: i64, seed: u64) -> Vec<i32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            i32::try_from(lo + (state % (hi - lo + 1) as u64) as i64).expect("fits i32")
        })
        .collect()
}

fn count(shape: &[u32]) -> usize {
    shape.iter().map(|&d| d as usize).product()
}

fn int8(shape: &[u32], seed: u64) -> (Vec<u32>, u8, Vec<i32>) {
    (shape.to_vec(), 8, values(count(shape), -127, 127, seed))
}

fn param(name: &'static str, shape: &[u32], seed: u64) -> (&'static str, Vec<u32>, u8, Vec<i32>) {
    let (shape, precision, data) = int8(shape, seed);
    (name, shape, precision, data)
}

/// (label, input shape, weight shape, padding, groups, stride) of a conv2d case.
type ConvCase = (&'static str, [u32; 4], [u32; 4], i64, i64, i64);

fn conv2d(
    label: &'static str,
    input: &[u32],
    weight: &[u32],
    pad: i64,
    groups: i64,
    stride: i64,
) -> Case {
    Case {
        label,
        op: "conv2d",
        attrs: json!({
            "channels": weight[0], "kernel_size": [weight[2], weight[3]],
            "strides": [stride, stride],
            "padding": [pad, pad], "dilation": [1, 1], "groups": groups,
        }),
        input: int8(input, 1),
        params: vec![param("w", weight, 2), param("b", &[weight[0]], 3)],
    }
}

fn max_pool(label: &'static str, input: &[u32], window: i64, stride: i64, pad: i64) -> Case {
    Case {
        label,
        op: "max_pool2d",
        attrs: json!({"pool_size": [window, window], "strides": [stride, stride], "padding": [pad, pad]}),
        input: int8(input, 4),
        params: vec![],
    }
}

fn unary(label: &'static str, op: &'static str, input: &[u32], attrs: Value) -> Case {
    Case {
        label,
        op,
        attrs,
        input: int8(input, 5),
        params: vec![],
    }
}

/// generate_proposals_v2 (Q8) over 8 × 8 positions of 4 anchors of 20 × 20 on a grid of step 3,
/// so that most candidates overlap and the NMS runs its IoU test often.
fn proposals() -> Case {
    let (h, w, a) = (8u32, 8u32, 4u32);
    let anchors = (h * w * a) as usize;
    let one = 1 << 8;
    let boxes: Vec<i32> = (0..anchors as i32)
        .flat_map(|i| {
            let (x, y) = ((i % 16) * 3 * one, (i / 16) * 3 * one);
            [x, y, x + 20 * one, y + 20 * one]
        })
        .collect();
    Case {
        label: "generate_proposals_v2, NMS over overlapping boxes",
        op: "generate_proposals_v2",
        attrs: json!({"frac_bits": 8, "pre_nms_top_n": 256, "post_nms_top_n": 128}),
        input: (vec![1, h, w, a], 32, values(anchors, 0, 255, 18)),
        params: vec![
            (
                "deltas",
                vec![1, h, w, 4 * a],
                32,
                values(4 * anchors, -32, 32, 19),
            ),
            ("im_shape", vec![1, 2], 32, vec![100 * one, 100 * one]),
            ("anchors", vec![h, w, a, 4], 32, boxes),
            ("variances", vec![h, w, a, 4], 32, vec![one; 4 * anchors]),
        ],
    }
}

fn cases() -> Vec<Case> {
    // (label, input, weight, padding, groups, stride) of every conv2d kernel path.
    let convolutions: [ConvCase; 14] = [
        (
            "conv2d 3x3, channels-last im2col",
            [1, 16, 16, 16],
            [16, 16, 3, 3],
            1,
            1,
            1,
        ),
        (
            "conv2d 1x1, pointwise",
            [1, 32, 16, 16],
            [32, 32, 1, 1],
            0,
            1,
            1,
        ),
        (
            "conv2d depthwise 3x3",
            [1, 16, 24, 24],
            [16, 1, 3, 3],
            1,
            16,
            1,
        ),
        (
            "conv2d depthwise 3x3 stride 2",
            [1, 16, 24, 24],
            [16, 1, 3, 3],
            1,
            16,
            2,
        ),
        (
            "conv2d depthwise 3x3 stride 3, plane of pairs",
            [1, 16, 24, 24],
            [16, 1, 3, 3],
            1,
            16,
            3,
        ),
        (
            "conv2d depthwise 3x3 pad 64",
            [1, 16, 2, 2],
            [16, 1, 3, 3],
            64,
            16,
            1,
        ),
        (
            "conv2d depthwise 3x3 pad 64 stride 3",
            [1, 16, 2, 2],
            [16, 1, 3, 3],
            64,
            16,
            3,
        ),
        (
            "conv2d depthwise 5x5 stride 2",
            [1, 16, 48, 48],
            [16, 1, 5, 5],
            2,
            16,
            2,
        ),
        (
            "conv2d 3x3, one output channel",
            [1, 4, 130, 130],
            [1, 4, 3, 3],
            1,
            1,
            1,
        ),
        (
            "conv2d 3x3 pad 64, sixteen output channels",
            [1, 4, 2, 2],
            [16, 4, 3, 3],
            64,
            1,
            1,
        ),
        (
            "conv2d 3x3 4->16 over 130x130",
            [1, 4, 130, 130],
            [16, 4, 3, 3],
            1,
            1,
            1,
        ),
        (
            "conv2d depthwise 3x3 stride 3 over 96x96",
            [1, 16, 96, 96],
            [16, 1, 3, 3],
            1,
            16,
            3,
        ),
        (
            "conv2d depthwise 5x5",
            [1, 16, 32, 32],
            [16, 1, 5, 5],
            2,
            16,
            1,
        ),
        (
            "conv2d pad 64, checked gather",
            [1, 4, 2, 2],
            [1, 4, 3, 3],
            64,
            1,
            1,
        ),
    ];
    let mut cases: Vec<Case> = convolutions
        .iter()
        .map(|&(label, input, weight, pad, groups, stride)| {
            conv2d(label, &input, &weight, pad, groups, stride)
        })
        .collect();
    cases.extend([
        Case {
            label: "dense, 4 rows (batched)",
            op: "dense",
            attrs: json!({"units": 64}),
            input: int8(&[4, 256], 6),
            params: vec![param("w", &[64, 256], 7), param("b", &[64], 8)],
        },
        Case {
            label: "dense, one row",
            op: "dense",
            attrs: json!({"units": 256}),
            input: int8(&[1, 1024], 6),
            params: vec![param("w", &[256, 1024], 7), param("b", &[256], 8)],
        },
        max_pool(
            "max_pool2d 2x2 stride 2, vector kernel",
            &[1, 16, 32, 32],
            2,
            2,
            0,
        ),
        max_pool(
            "max_pool2d 3x3 stride 1 pad 1, vector kernel",
            &[1, 16, 32, 32],
            3,
            1,
            1,
        ),
        max_pool(
            "max_pool2d 41x41 pad 40, windows mostly padding",
            &[1, 1, 8, 8],
            41,
            1,
            40,
        ),
        max_pool(
            "max_pool2d 5x5 pad 2 over 2x2 planes, windows mostly padding",
            &[1, 64, 2, 2],
            5,
            1,
            2,
        ),
        Case {
            label: "broadcast_add, equal shapes",
            op: "broadcast_add",
            attrs: json!({}),
            input: int8(&[64, 256], 9),
            params: vec![param("z", &[64, 256], 10)],
        },
        Case {
            label: "broadcast_add, a row broadcast",
            op: "broadcast_add",
            attrs: json!({}),
            input: int8(&[64, 256], 11),
            params: vec![param("z", &[256], 12)],
        },
        unary("relu", "relu", &[64, 256], json!({})),
        unary(
            "cvm_right_shift",
            "cvm_right_shift",
            &[64, 256],
            json!({"precision": 8, "shift_bit": 3}),
        ),
        unary("flatten", "flatten", &[1, 16, 32, 32], json!({})),
        unary(
            "transpose",
            "transpose",
            &[64, 256],
            json!({"axes": [1, 0]}),
        ),
        unary("sum, last axis", "sum", &[256, 64], json!({"axis": [1]})),
        Case {
            label: "Exp",
            op: "Exp",
            attrs: json!({"frac_bits": 16}),
            input: (vec![256], 32, values(256, -10 << 16, 10 << 16, 13)),
            params: vec![],
        },
        Case {
            label: "CINN Conv forward 3x3",
            op: "Conv",
            attrs: json!({
                "conv_type": "forward", "strides": [1, 1], "paddings": [1, 1],
                "dilations": [1, 1], "groups": 1, "frac_bits": 8,
            }),
            input: int8(&[1, 4, 8, 8], 14),
            params: vec![param("w", &[4, 4, 3, 3], 15)],
        },
        proposals(),
        Case {
            label: "CINN Add",
            op: "Add",
            attrs: json!({"frac_bits": 16}),
            input: (vec![64, 256], 32, values(64 * 256, -1 << 20, 1 << 20, 16)),
            params: vec![(
                "z",
                vec![64, 256],
                32,
                values(64 * 256, -1 << 20, 1 << 20, 17),
            )],
        },
    ]);
    cases
}

/// The text model of `case` with `copies` copies of its node; the first one's output is the
/// model's output.
fn model(case: &Case, copies: usize) -> Vec<u8> {
    let mut inputs = vec![json!("x")];
    inputs.extend(case.params.iter().map(|p| json!(p.0)));
    let nodes: Vec<Value> = (0..copies)
        .map(|i| {
            json!({
                "name": if i == 0 { "y".to_string() } else { format!("y{i}") },
                "op": case.op,
                "inputs": inputs,
                "attrs": case.attrs,
            })
        })
        .collect();
    let params: Vec<Value> = case
        .params
        .iter()
        .map(|(name, shape, precision, data)| {
            json!({"name": name, "shape": shape, "precision": precision, "data": data})
        })
        .collect();
    let text = json!({
        "format": "cvm-text/1",
        "inputs": [{"name": "x", "shape": case.input.0, "precision": case.input.1}],
        "params": params,
        "nodes": nodes,
        "outputs": ["y"],
    });
    cvm_formats::text::from_json(&text, Path::new("."))
        .unwrap_or_else(|e| panic!("{}: {e}", case.label))
        .encode()
}

/// The gas of the node under test (the estimate's last node: the copy of the doubled model).
fn node_gas(case: &Case) -> u64 {
    let model = cvm_engine::load(&model(case, 2), SCHEDULE).expect("loads");
    model.estimate().nodes.last().expect("a node").gas
}

/// (fuel, gas_used) of one run of the model with `copies` copies of the node, in a fresh session.
fn run(wasm: &WasmEngine, case: &Case, copies: usize) -> (u64, u64) {
    let mut session = wasm.session().expect("session");
    if let Some(report) = session.load(&model(case, copies), SCHEDULE).expect("load") {
        panic!("{} does not load: {:?}", case.label, report.failure);
    }
    let inputs = [InputTensor {
        shape: case.input.0.clone(),
        data: case.input.2.clone(),
    }];
    let report = session.run(&encode_inputs(&inputs), u64::MAX).expect("run");
    assert!(
        report.error_code().is_none(),
        "{} failed: {:?}",
        case.label,
        report.failure
    );
    (session.fuel_used().expect("fuel"), report.outcome.gas_used)
}

#[test]
fn every_kernel_path_burns_fuel_in_proportion_to_its_gas() {
    assert_eq!(SCHEDULE, cvm_engine::gas::Schedule::NEWEST.version);
    let wasm = WasmEngine::new().expect("engine");
    let mut lines = vec![
        format!(
            "| node | gas (v{SCHEDULE}) | fuel | fuel/gas, normalised to {} |",
            MEDIAN_MILLI_FUEL as f64 / 1000.0
        ),
        "| --- | ---: | ---: | ---: |".to_string(),
    ];
    let mut outside = Vec::new();
    for case in cases() {
        let (_, single_gas) = run(&wasm, &case, 1);
        let (double_fuel, double_gas) = run(&wasm, &case, 2);
        let (triple_fuel, triple_gas) = run(&wasm, &case, 3);
        let fuel = triple_fuel - double_fuel;
        let node_gas = node_gas(&case);
        // The first copy's arena costs run gas too, unless the arena still fits in the inputs'
        // memory (`Schedule::fresh_arena`); the second copy reuses it and pays its node alone.
        assert!(
            double_gas >= single_gas + node_gas,
            "{}: the copy pays its node and any new arena",
            case.label
        );
        assert_eq!(
            triple_gas,
            double_gas + node_gas,
            "{}: a copy into dead elements pays its node alone",
            case.label
        );
        let gas = node_gas;
        // fuel / gas / median, in thousandths.
        let normalised = fuel * 1_000_000 / (gas * MEDIAN_MILLI_FUEL);
        lines.push(format!(
            "| {} | {gas} | {fuel} | {}.{:03} |",
            case.label,
            normalised / 1000,
            normalised % 1000
        ));
        if !(500..=2000).contains(&normalised) {
            outside.push(case.label);
        }
    }
    eprintln!("{}", lines.join("\n"));
    assert!(
        outside.is_empty(),
        "fuel per gas outside [0.5, 2] of the calibration's median: {outside:?}"
    );
}
