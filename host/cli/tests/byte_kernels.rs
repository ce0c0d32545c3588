//! The `i8` kernels of conv2d and dense (`engine/src/kernels/dot8.rs`, `conv/bytes.rs`), which
//! run when validation proves the data non-negative, compute the plain formula natively and in
//! wasm (relaxed SIMD), with identical reports: random `relu` → `conv2d` models (pointwise and
//! im2col shapes, groups, strides, padding, odd sizes) and `relu` → `dense` models, inputs at
//! −127, 0 and 127 often (so the data reaching the kernels is 0 and 127 often), weights at ±127.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use cvm_cli::runner::{EngineKind, execute};
use cvm_engine::InputTensor;
use cvm_engine::gas::Schedule;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::ops;
use cvm_engine::outcome::Status;
use cvm_runtime::wasm::WasmEngine;

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
    fn int8(&mut self) -> i32 {
        match self.next() % 6 {
            0 => 127,
            1 => -127,
            2 => 0,
            _ => (self.next() % 255) as i32 - 127,
        }
    }
}

fn attr(name: &str, value: AttrValue) -> Attr {
    Attr {
        name: name.into(),
        value,
    }
}

fn param(name: &str, shape: Vec<u32>, precision: u8, data: Vec<i32>) -> ParamDecl {
    ParamDecl {
        name: name.into(),
        shape,
        precision,
        data: ParamData::I32(data),
    }
}

/// input → relu → `op` (weights, bias parameters) → output.
fn model(
    input: Vec<u32>,
    op: &str,
    attrs: Vec<Attr>,
    weights: ParamDecl,
    bias: ParamDecl,
) -> Model {
    let code = |name: &str| ops::by_name(name).unwrap().code;
    Model {
        inputs: vec![InputDecl {
            name: "x".into(),
            shape: input,
            precision: 8,
        }],
        params: vec![weights, bias],
        nodes: vec![
            Node {
                name: "relu".into(),
                op: code("relu"),
                inputs: vec![ValueRef::Input(0)],
                attrs: vec![],
            },
            Node {
                name: "mac".into(),
                op: code(op),
                inputs: vec![
                    ValueRef::Node { node: 0, output: 0 },
                    ValueRef::Param(0),
                    ValueRef::Param(1),
                ],
                attrs,
            },
        ],
        outputs: vec![OutputDecl {
            name: "y".into(),
            value: ValueRef::Node { node: 1, output: 0 },
        }],
    }
}

/// Runs `model` natively and in wasm; both reports must be equal and hold `expected`.
fn check(wasm: &WasmEngine, model: &Model, x: InputTensor, expected: &[i32], what: &str) {
    let bytes = model.encode();
    let schedule = Schedule::ALL[0].version;
    let inputs = [x];
    let native = execute(
        EngineKind::Native,
        None,
        &bytes,
        &inputs,
        u64::MAX,
        schedule,
    )
    .unwrap();
    let in_wasm = execute(
        EngineKind::Wasm,
        Some(wasm),
        &bytes,
        &inputs,
        u64::MAX,
        schedule,
    )
    .unwrap();
    assert_eq!(native, in_wasm, "{what}: native and wasm reports differ");
    match &native.outcome.status {
        Status::Ok { outputs } => assert_eq!(outputs[0].data, expected, "{what}"),
        Status::Error { code, .. } => panic!("{what}: failed with code {code}"),
    }
}

#[test]
fn byte_kernels_equal_the_formula_natively_and_in_wasm() {
    let wasm = WasmEngine::new().unwrap();
    let mut rng = Rng(0x8B17_E5EE_D000_0001);
    for case in 0..60 {
        let groups = if case % 3 == 0 { rng.size(1, 3) } else { 1 };
        let group_in = rng.size(1, 21);
        let group_out = rng.size(1, 9);
        let (c, oc) = (groups * group_in, groups * group_out);
        let pointwise = case % 2 == 0;
        let (kh, kw) = if pointwise {
            (1, 1)
        } else {
            (rng.size(1, 3), rng.size(1, 3))
        };
        let (stride, pad) = if pointwise {
            (1, 0)
        } else {
            (rng.size(1, 2), rng.size(0, 1))
        };
        let (h, w) = (rng.size(kh.max(1), 9), rng.size(kw.max(1), 11));
        let (oh, ow) = (
            (h + 2 * pad - kh) / stride + 1,
            (w + 2 * pad - kw) / stride + 1,
        );
        let x: Vec<i32> = (0..c * h * w).map(|_| rng.int8()).collect();
        let depth = group_in * kh * kw;
        let weights: Vec<i32> = (0..oc * depth).map(|_| rng.int8()).collect();
        let bias: Vec<i32> = (0..oc).map(|_| rng.int8() * 100).collect();
        let mut expected = Vec::new();
        for o in 0..oc {
            let g = o / group_out;
            for p in 0..oh {
                for q in 0..ow {
                    let mut sum = bias[o];
                    for ic in 0..group_in {
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let (row, col) = (
                                    (p * stride + ki) as isize - pad as isize,
                                    (q * stride + kj) as isize - pad as isize,
                                );
                                if row < 0 || col < 0 || row as usize >= h || col as usize >= w {
                                    continue;
                                }
                                let value = x
                                    [((g * group_in + ic) * h + row as usize) * w + col as usize]
                                    .max(0);
                                sum +=
                                    value * weights[(o * group_in + ic) * kh * kw + ki * kw + kj];
                            }
                        }
                    }
                    expected.push(sum);
                }
            }
        }
        let ints = |values: &[usize]| AttrValue::Ints(values.iter().map(|&v| v as i64).collect());
        let attrs = vec![
            attr("channels", AttrValue::Int(oc as i64)),
            attr("groups", AttrValue::Int(groups as i64)),
            attr("kernel_size", ints(&[kh, kw])),
            attr("padding", ints(&[pad, pad])),
            attr("strides", ints(&[stride, stride])),
        ];
        let dims = |values: &[usize]| values.iter().map(|&v| v as u32).collect::<Vec<u32>>();
        let model = model(
            dims(&[1, c, h, w]),
            "conv2d",
            attrs,
            param("w", dims(&[oc, group_in, kh, kw]), 8, weights),
            param("b", dims(&[oc]), 16, bias),
        );
        let input = InputTensor {
            shape: dims(&[1, c, h, w]),
            data: x,
        };
        check(
            &wasm,
            &model,
            input,
            &expected,
            &format!("conv2d case {case}"),
        );
    }
    for case in 0..30 {
        let (m, k, n) = (rng.size(1, 5), rng.size(1, 300), rng.size(1, 11));
        let x: Vec<i32> = (0..m * k).map(|_| rng.int8()).collect();
        let weights: Vec<i32> = (0..n * k).map(|_| rng.int8()).collect();
        let bias: Vec<i32> = (0..n).map(|_| rng.int8()).collect();
        let expected: Vec<i32> = (0..m * n)
            .map(|at| {
                let (i, j) = (at / n, at % n);
                bias[j]
                    + (0..k)
                        .map(|t| x[i * k + t].max(0) * weights[j * k + t])
                        .sum::<i32>()
            })
            .collect();
        let model = model(
            vec![m as u32, k as u32],
            "dense",
            vec![],
            param("w", vec![n as u32, k as u32], 8, weights),
            param("b", vec![n as u32], 8, bias),
        );
        let input = InputTensor {
            shape: vec![m as u32, k as u32],
            data: x,
        };
        check(
            &wasm,
            &model,
            input,
            &expected,
            &format!("dense case {case}"),
        );
    }
}
