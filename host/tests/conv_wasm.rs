//! The depthwise and pointwise conv2d kernels in wasm: their SIMD128 paths (the tap plane's three
//! column layouts and row phases, the even and odd outputs of stride 1, the channel pairs and
//! tiles of the pointwise kernel, the bias added as sums are stored) must give the plain formula,
//! the same as natively. Random shapes, each run natively and in wasm and compared with sums
//! computed here.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

mod common;

use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Schedule;
use cvm_engine::kernels::conv::{Columns, ConvShape};
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::{Status, ops};
use cvm_host::wasm::WasmEngine;

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

/// The plain formula, bias included.
fn plain(s: &ConvShape, x: &[i32], w: &[i32], bias: &[i32]) -> Vec<i32> {
    let (group_in, group_out) = (s.group_in(), s.group_out());
    let mut out = Vec::new();
    for n in 0..s.batch {
        for oc in 0..s.out_channels {
            let g = oc / group_out;
            for p in 0..s.out_h {
                for q in 0..s.out_w {
                    let mut sum = bias[oc];
                    for ic in 0..group_in {
                        let c = g * group_in + ic;
                        for ki in 0..s.kernel_h {
                            for kj in 0..s.kernel_w {
                                let h = (p * s.strides[0] + ki * s.dilation[0])
                                    .wrapping_sub(s.padding[0]);
                                let col = (q * s.strides[1] + kj * s.dilation[1])
                                    .wrapping_sub(s.padding[1]);
                                if h < s.height && col < s.width {
                                    let xv =
                                        x[((n * s.in_channels + c) * s.height + h) * s.width + col];
                                    let wv = w[((oc * group_in + ic) * s.kernel_h + ki)
                                        * s.kernel_w
                                        + kj];
                                    sum += xv * wv;
                                }
                            }
                        }
                    }
                    out.push(sum);
                }
            }
        }
    }
    out
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
        let extent = |size: usize, pad: usize, dil: usize, kernel: usize, stride: usize| {
            let span = dil * (kernel - 1) + 1;
            (size + 2 * pad >= span).then(|| (size + 2 * pad - span) / stride + 1)
        };
        let (Some(out_h), Some(out_w)) = (
            extent(height, padding[0], dilation[0], kernel_h, strides[0]),
            extent(width, padding[1], dilation[1], kernel_w, strides[1]),
        ) else {
            continue;
        };
        return ConvShape {
            batch: rng.size(1, 2),
            in_channels: groups * group_in,
            height,
            width,
            out_channels: groups * group_out,
            groups,
            kernel_h,
            kernel_w,
            out_h,
            out_w,
            strides,
            padding,
            dilation,
        };
    }
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
    // Cases per path: depthwise on each column layout, with row phases, pointwise.
    let mut paths = [0usize; 5];
    for case in 0..90 {
        let pointwise = case % 3 == 2;
        let s = shape(&mut rng, pointwise);
        let x = rng.int8s(s.batch * s.in_channels * s.height * s.width);
        let w = rng.int8s(s.out_channels * s.depth());
        let bias: Vec<i32> = rng.int8s(s.out_channels).iter().map(|&b| b * 200).collect();
        if s.uses_pointwise() {
            paths[4] += 1;
        } else if s.uses_depthwise() {
            match s.tap_plane().columns {
                Columns::Split => paths[0] += 1,
                Columns::Direct => paths[1] += 1,
                Columns::Pairs => paths[2] += 1,
            }
            paths[3] += usize::from(s.strides[0] > 1);
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
            Schedule::CURRENT.version,
        )
        .unwrap_or_else(|err| panic!("{s:?}: {err}"));
        let Status::Ok { outputs } = report.outcome.status else {
            panic!("{s:?}: {report:?}");
        };
        assert_eq!(outputs[0].data, plain(&s, &x, &w, &bias), "{s:?}");
    }
    assert!(
        paths.iter().all(|&n| n >= 5),
        "cases per path (split, direct, pairs, row phases, pointwise): {paths:?}"
    );
}
