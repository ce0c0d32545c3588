//! The depthwise and pointwise conv2d kernels in wasm: their SIMD128 paths (the tap plane's three
//! column layouts and row phases, the even and odd outputs of stride 1, planes stored in runs of
//! sixteen whole steps, the channel pairs and tiles of the pointwise kernel, the bias added as
//! sums are stored, the 3 × 3 stride-2 kernel and its ways of ending a pair of rows) must give
//! the plain formula, the same as natively. Random shapes, each run natively and in wasm and
//! compared with sums computed here.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

mod common;
#[path = "../../../engine/tests/common/mod.rs"]
mod engine_common;

use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Schedule;
use cvm_engine::kernels::ConvShape;
use cvm_engine::kernels::conv::Columns;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::{Status, ops};
use cvm_runtime::wasm::WasmEngine;
use engine_common::conv::{halving, mobile_shape, plain_conv2d, plus_bias, sized};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn size(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low + 1) as u64) as usize
    }

    fn int8s(&mut self, n: usize) -> Vec<i32> {
        (0..n).map(|_| (self.next() % 255) as i32 - 127).collect()
    }
}

fn ints(values: [usize; 2]) -> AttrValue {
    AttrValue::Ints(values.iter().map(|&v| v as i64).collect())
}

/// A random depthwise (`pointwise` false) or pointwise shape.
fn shape(rng: &mut Rng, pointwise: bool) -> ConvShape {
    loop {
        let groups = rng.size(1, 3);
        let (group_in, group_out) = if pointwise {
            (rng.size(2, 21), rng.size(1, 9))
        } else {
            (1, rng.size(1, 2))
        };
        let (kernel_h, kernel_w) = if pointwise {
            (1, 1)
        } else {
            (rng.size(1, 5), rng.size(1, 5))
        };
        let strides = if pointwise {
            [1, 1]
        } else {
            [rng.size(1, 3), rng.size(1, 3)]
        };
        let dilation = [rng.size(1, 2), if rng.size(0, 1) == 0 { 1 } else { 2 }];
        let padding = if pointwise {
            [0, 0]
        } else {
            [rng.size(0, 2), rng.size(0, 2)]
        };
        let (height, width) = (rng.size(1, 13), rng.size(1, 37));
        let Some(mut shape) = sized(ConvShape {
            batch: 1,
            in_channels: groups * group_in,
            height,
            width,
            out_channels: groups * group_out,
            groups,
            kernel_h,
            kernel_w,
            out_h: 0,
            out_w: 0,
            strides,
            padding,
            dilation,
        }) else {
            continue;
        };
        shape.batch = rng.size(1, 2);
        return shape;
    }
}

/// A random 3 × 3 depthwise shape at stride 2 with padding 1 of up to six steps per row, every
/// remainder of the width by eight as likely: rows whose last step holds one to four outputs.
fn halving_shape(rng: &mut Rng) -> ConvShape {
    let (channels, multiplier) = (rng.size(1, 3), rng.size(1, 2));
    let (batch, height) = (rng.size(1, 2), rng.size(1, 17));
    let width = 8 * rng.size(0, 5) + rng.size(1, 8);
    halving(batch, channels, multiplier, height, width)
}

fn model(s: &ConvShape, w: &[i32], bias: &[i32]) -> Vec<u8> {
    let attr = |name: &str, value| Attr {
        name: name.into(),
        value,
    };
    Model {
        inputs: vec![InputDecl {
            name: "x".into(),
            shape: [s.batch, s.in_channels, s.height, s.width]
                .map(|d| d as u32)
                .to_vec(),
            precision: 8,
        }],
        params: vec![
            ParamDecl {
                name: "w".into(),
                shape: [s.out_channels, s.group_in(), s.kernel_h, s.kernel_w]
                    .map(|d| d as u32)
                    .to_vec(),
                precision: 8,
                data: ParamData::I8(w.iter().map(|&v| v as i8).collect()),
            },
            ParamDecl {
                name: "b".into(),
                shape: vec![s.out_channels as u32],
                precision: 16,
                data: ParamData::I32(bias.to_vec()),
            },
        ],
        nodes: vec![Node {
            name: "c".into(),
            op: ops::by_name("conv2d").unwrap().code,
            inputs: vec![ValueRef::Input(0), ValueRef::Param(0), ValueRef::Param(1)],
            attrs: vec![
                attr("dilation", ints(s.dilation)),
                attr("groups", AttrValue::Int(s.groups as i64)),
                attr("padding", ints(s.padding)),
                attr("strides", ints(s.strides)),
            ],
        }],
        outputs: vec![OutputDecl {
            name: "c".into(),
            value: ValueRef::Node { node: 0, output: 0 },
        }],
    }
    .encode()
}

#[test]
fn depthwise_and_pointwise_kernels_equal_the_formula_in_wasm() {
    let wasm = WasmEngine::new().unwrap();
    let mut rng = Rng(0xC04E_5EED);
    // Cases per path: depthwise on each column layout, with row phases, pointwise, depthwise
    // planes stored in runs of sixteen whole steps, the 3 × 3 stride-2 kernel, its pairs of rows
    // with joined last steps, and those whose upper row's last step stores onto the lower row.
    let mut paths = [0usize; 9];
    for case in 0..200 {
        let pointwise = case % 3 == 2;
        let s = match case {
            0..90 => shape(&mut rng, pointwise),
            90..170 => mobile_shape(|low, high| rng.size(low, high)),
            _ => halving_shape(&mut rng),
        };
        let x = rng.int8s(s.batch * s.in_channels * s.height * s.width);
        let w = rng.int8s(s.out_channels * s.depth());
        let bias: Vec<i32> = rng.int8s(s.out_channels).iter().map(|&b| b * 200).collect();
        if s.uses_pointwise() {
            paths[4] += 1;
        } else if s.uses_depthwise_3x3_s2() {
            paths[6] += 1;
            paths[7] += usize::from(s.out_w % 4 == 2 && s.out_h >= 2);
            paths[8] += usize::from(s.out_w % 2 == 1 && s.out_h >= 2);
        } else if s.uses_depthwise() {
            match s.tap_plane().columns {
                Columns::Split => paths[0] += 1,
                Columns::Direct => paths[1] += 1,
                Columns::Pairs => paths[2] += 1,
            }
            paths[3] += usize::from(s.strides[0] > 1);
            let plane = s.tap_plane();
            paths[5] += usize::from(
                plane.columns != Columns::Split
                    && s.tap_entries() <= 6
                    && plane.row.is_multiple_of(8)
                    && plane.steps > 16,
            );
        }
        let inputs = [InputTensor {
            shape: [s.batch, s.in_channels, s.height, s.width]
                .map(|d| d as u32)
                .to_vec(),
            data: x.clone(),
        }];
        let report = common::run_both(
            &wasm,
            &model(&s, &w, &bias),
            &inputs,
            u64::MAX,
            Schedule::NEWEST.version,
        )
        .unwrap_or_else(|err| panic!("{s:?}: {err}"));
        let Status::Ok { outputs } = report.outcome.status else {
            panic!("{s:?}: {report:?}");
        };
        let expected = plus_bias(&s, plain_conv2d(&s, &x, &w), &bias);
        assert_eq!(outputs[0].data, expected, "{s:?}");
    }
    assert!(
        paths.iter().all(|&n| n >= 5),
        "cases per path (split, direct, pairs, row phases, pointwise, runs, 3 × 3 stride 2, \
         joined last steps, last steps stored onto the next row): {paths:?}"
    );
}
