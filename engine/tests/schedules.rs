//! Choosing the gas schedule per load: `load` prices a model under the version it names (there
//! is no default), reports that version in the estimate, and charges exactly the estimate when it runs;
//! a version the engine does not define is `UnsupportedVersion` with gas 0, whatever the bytes.
//! Each node's gas is checked against its work counted here by hand from the formulas of
//! docs/gas.md, priced with the rates of the schedule's table row; the figures themselves are
//! pinned by the fixtures.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use cvm_engine::gas::Schedule;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::ops;
use cvm_engine::{ErrorCode, InputTensor, Status, ValidatedModel};

fn node(name: &str, op: &str, inputs: Vec<ValueRef>, attrs: Vec<Attr>) -> Node {
    Node {
        name: name.into(),
        op: ops::by_name(op).unwrap().code,
        inputs,
        attrs,
    }
}

fn attr(name: &str, value: AttrValue) -> Attr {
    Attr {
        name: name.into(),
        value,
    }
}

/// A 32-bit parameter.
fn param32(name: &str, shape: Vec<u32>, data: Vec<i32>) -> ParamDecl {
    ParamDecl {
        name: name.into(),
        shape,
        precision: 32,
        data: ParamData::I32(data),
    }
}

/// dense (8-bit weights, the multiply-accumulate kernel) → relu → cvm_right_shift → sum, a
/// generate_proposals_v2 over two anchors (Q8) and two depthwise conv2d (strides 1 and 2):
/// operators that count multiply-accumulates, taps, pairs, evaluations and slices.
fn model() -> Vec<u8> {
    let one = 1 << 8;
    Model {
        inputs: vec![
            InputDecl {
                name: "x".into(),
                shape: vec![2, 20],
                precision: 8,
            },
            InputDecl {
                name: "image".into(),
                shape: vec![1, 2, 6, 6],
                precision: 8,
            },
        ],
        params: vec![
            ParamDecl {
                name: "w".into(),
                shape: vec![5, 20],
                precision: 8,
                data: ParamData::I8((0..100).map(|i| (i % 7 - 3) as i8).collect()),
            },
            param32("scores", vec![1, 1, 2, 1], vec![one, one / 2]),
            param32("bbox_deltas", vec![1, 1, 2, 4], vec![0; 8]),
            param32("im_shape", vec![1, 2], vec![100 * one, 100 * one]),
            param32(
                "anchors",
                vec![1, 2, 1, 4],
                vec![0, 0, 10 * one, 10 * one, 5 * one, 0, 15 * one, 10 * one],
            ),
            param32("variances", vec![1, 2, 1, 4], vec![one; 8]),
            ParamDecl {
                name: "kernels".into(),
                shape: vec![2, 1, 3, 3],
                precision: 8,
                data: ParamData::I8((0..18).map(|i| (i % 5 - 2) as i8).collect()),
            },
        ],
        nodes: vec![
            node(
                "d",
                "dense",
                vec![ValueRef::Input(0), ValueRef::Param(0)],
                vec![
                    attr("units", AttrValue::Int(5)),
                    attr("use_bias", AttrValue::Bool(false)),
                ],
            ),
            node(
                "r",
                "relu",
                vec![ValueRef::Node { node: 0, output: 0 }],
                Vec::new(),
            ),
            node(
                "q",
                "cvm_right_shift",
                vec![ValueRef::Node { node: 1, output: 0 }],
                vec![
                    attr("precision", AttrValue::Int(8)),
                    attr("shift_bit", AttrValue::Int(2)),
                ],
            ),
            node(
                "s",
                "sum",
                vec![ValueRef::Node { node: 2, output: 0 }],
                Vec::new(),
            ),
            node(
                "p",
                "generate_proposals_v2",
                (1..=5).map(ValueRef::Param).collect(),
                vec![
                    attr("frac_bits", AttrValue::Int(8)),
                    attr("post_nms_top_n", AttrValue::Int(2)),
                    attr("pre_nms_top_n", AttrValue::Int(2)),
                ],
            ),
            node(
                "c",
                "conv2d",
                vec![ValueRef::Input(1), ValueRef::Param(6)],
                vec![
                    attr("groups", AttrValue::Int(2)),
                    attr("padding", AttrValue::Ints(vec![1, 1])),
                    attr("use_bias", AttrValue::Bool(false)),
                ],
            ),
            node(
                "h",
                "conv2d",
                vec![ValueRef::Input(1), ValueRef::Param(6)],
                vec![
                    attr("groups", AttrValue::Int(2)),
                    attr("padding", AttrValue::Ints(vec![1, 1])),
                    attr("strides", AttrValue::Ints(vec![2, 2])),
                    attr("use_bias", AttrValue::Bool(false)),
                ],
            ),
        ],
        outputs: vec![
            OutputDecl {
                name: "s".into(),
                value: ValueRef::Node { node: 3, output: 0 },
            },
            OutputDecl {
                name: "rois".into(),
                value: ValueRef::Node { node: 4, output: 0 },
            },
            OutputDecl {
                name: "c".into(),
                value: ValueRef::Node { node: 5, output: 0 },
            },
            OutputDecl {
                name: "h".into(),
                value: ValueRef::Node { node: 6, output: 0 },
            },
        ],
    }
    .encode()
}

fn inputs() -> Vec<InputTensor> {
    vec![
        InputTensor {
            shape: vec![2, 20],
            data: (0..40).map(|i| (i * 13) % 255 - 127).collect(),
        },
        InputTensor {
            shape: vec![1, 2, 6, 6],
            data: (0..72).map(|i| (i * 29) % 255 - 127).collect(),
        },
    ]
}

/// Versions no schedule has: 0, one past the newest, and the largest.
fn undefined_versions() -> [u32; 3] {
    let newest = Schedule::ALL.iter().map(|s| s.version).max().unwrap();
    [0, newest + 1, u32::MAX]
}

/// The work of every node of `model`, counted by hand from docs/gas.md: its class and
/// (macs, reads, writes, taps, pairs, evals, slices).
const WORK: [(&str, &str, [u64; 7]); 7] = [
    // dense: 2 rows · 5 units · ⌈20/16⌉·16; reads x (40) and w (100); writes 2 × 5.
    ("dense", "batched", [2 * 5 * 32, 140, 10, 0, 0, 0, 0]),
    ("relu", "", [0, 10, 10, 0, 0, 0, 0]),
    ("cvm_right_shift", "", [0, 10, 10, 0, 0, 0, 0]),
    ("sum", "", [0, 10, 1, 0, 0, 0, 0]),
    // N = 1, H·W·A = 2 anchors, k = 2 candidates, m = 2 kept: reads 2 + 13·2, writes rois (2 × 4),
    // probabilities (2), counts per image (1) and in all (1), pairs N·k·m, evals 2·N·k.
    ("generate_proposals_v2", "", [0, 28, 12, 0, 4, 4, 0]),
    // Depthwise 3 × 3, stride 1, padding 1: 2 × 6 × 6 outputs, 9 macs and taps each; reads the
    // image (72) and kernels (18); one slice per plane (N·C = 2).
    ("conv2d", "depthwise", [72 * 9, 90, 72, 2 * 36 * 9, 0, 0, 2]),
    // Stride 2: 2 × 3 × 3 outputs (a stride of 2 without dilation stays `depthwise`).
    ("conv2d", "depthwise", [18 * 9, 90, 18, 2 * 9 * 9, 0, 0, 2]),
];

/// The gas of every node of `model` under `schedule`, from [`WORK`]: the base of its row plus its
/// work at the row's rates in hundredths, rounded up once.
fn priced_by_hand(schedule: &Schedule) -> Vec<u64> {
    WORK.iter()
        .map(|&(op, class, work)| {
            let row = schedule.row(op, class).unwrap();
            let r = row.rates;
            let rates = [r.mac, r.read, r.write, r.tap, r.pair, r.eval, r.slice];
            let hundredths: u64 = rates.iter().zip(work).map(|(rate, n)| rate * n).sum();
            row.base + hundredths.div_ceil(100)
        })
        .collect()
}

#[test]
fn undefined_versions_are_unsupported_version_with_gas_0() {
    let defined: Vec<String> = Schedule::ALL
        .iter()
        .map(|s| s.version.to_string())
        .collect();
    let (last, rest) = defined.split_last().unwrap();
    let listed = if rest.is_empty() {
        format!("version {last}")
    } else {
        format!("versions {} and {last}", rest.join(", "))
    };
    for version in undefined_versions().into_iter().chain([2, 7]) {
        // Checked before the bytes: garbage and a valid model give the same report.
        for bytes in [model(), b"not a model".to_vec(), Vec::new()] {
            let report = *cvm_engine::load(&bytes, version).unwrap_err();
            assert_eq!(
                report.outcome.status,
                Status::Error {
                    code: ErrorCode::UnsupportedVersion.number(),
                    node: None
                },
                "version {version}"
            );
            assert_eq!(report.outcome.gas_used, 0);
            let failure = report.failure.unwrap();
            assert_eq!(failure.code_name, "UnsupportedVersion");
            assert_eq!(
                failure.message,
                format!(
                    "gas schedule version {version} is not defined; this engine defines {listed}"
                )
            );
        }
        let error = cvm_engine::schedule_by_version(version).unwrap_err();
        assert_eq!(error.code, ErrorCode::UnsupportedVersion);
    }
}

#[test]
fn each_schedule_prices_the_model_and_charges_its_estimate() {
    let bytes = model();
    for schedule in Schedule::ALL {
        let version = schedule.version;
        assert_eq!(cvm_engine::schedule_by_version(version).unwrap(), schedule);
        let model = cvm_engine::load(&bytes, version).unwrap();
        assert_eq!(model.schedule, schedule);
        let estimate = model.estimate();
        assert_eq!(estimate.schedule_version, version);
        let gas: Vec<u64> = estimate.nodes.iter().map(|node| node.gas).collect();
        let ops: Vec<(&str, &str)> = model
            .nodes
            .iter()
            .map(|node| (node.op.name, model.usage_of(node).unwrap().class))
            .collect();
        let listed: Vec<(&str, &str)> = WORK.iter().map(|&(op, class, _)| (op, class)).collect();
        assert_eq!(ops, listed, "schedule {version}");
        assert_eq!(gas, priced_by_hand(schedule), "schedule {version}");
        assert_eq!(
            estimate.total_gas,
            estimate.run_gas + gas.iter().sum::<u64>()
        );

        let report = cvm_engine::run(&model, inputs(), u64::MAX);
        assert!(
            matches!(report.outcome.status, Status::Ok { .. }),
            "{report:?}"
        );
        assert_eq!(report.outcome.gas_used, estimate.total_gas);
        let starved = cvm_engine::run(&model, inputs(), estimate.total_gas - 1);
        assert_eq!(starved.error_code(), Some(ErrorCode::OutOfGas));

        let direct = ValidatedModel::from_bytes(&bytes, schedule).unwrap();
        assert_eq!(direct.estimate(), estimate);
    }
}

#[test]
fn load_failures_other_than_the_version_are_the_same_under_every_schedule() {
    let mut truncated = model();
    truncated.truncate(truncated.len() / 2);
    let reports: Vec<_> = Schedule::ALL
        .iter()
        .map(|s| *cvm_engine::load(&truncated, s.version).unwrap_err())
        .collect();
    assert_eq!(reports[0].error_code(), Some(ErrorCode::MalformedModel));
    assert!(reports.iter().all(|report| report == &reports[0]));
}
