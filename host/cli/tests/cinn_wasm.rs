//! CINN `Dot` and `Conv` take their exact dot products in vector lanes in wasm and one product at
//! a time natively (`cvm_engine::kernels::wide`): both must give the plain `i128` result. Two
//! Dots of either sign are run natively and in wasm and compared with the sums computed here:
//! one over values of up to 27 bits (products of up to 53 bits, where the high halves matter),
//! rescaled by 2^30, and one over values of up to 14 bits with no rescaling, where every bit of
//! the low halves shows.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

mod common;

use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Schedule;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::{Status, ops};
use cvm_runtime::wasm::WasmEngine;

/// round(sum / 2^f), halves away from zero.
fn rescale(sum: i128, f: u32) -> i128 {
    if f == 0 {
        return sum;
    }
    let magnitude = (sum.unsigned_abs() + (1u128 << (f - 1))) >> f;
    if sum < 0 {
        -(magnitude as i128)
    } else {
        magnitude as i128
    }
}

#[test]
fn wide_dot_products_are_exact_in_wasm() {
    let wasm = WasmEngine::new().unwrap();
    // (K, F, bits): the sums stay within i32 after the rescale.
    for (k, f, bits) in [(77usize, 30u32, 26u32), (30, 0, 13)] {
        check_dot(&wasm, k, f, bits);
    }
}

/// A (3, K)·(K, 5) Dot over values below 2^bits in magnitude, rescaled by 2^f, natively and in
/// wasm against the plain sum.
fn check_dot(wasm: &WasmEngine, k: usize, f: u32, bits: u32) {
    let (m, n) = (3usize, 5usize);
    let mut state = 0x0d07_5eed_u64 ^ u64::from(bits);
    let mut value = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Of either sign, often at the ends.
        match state % 4 {
            0 => (1 << bits) - 1,
            1 => -(1 << bits) + 1,
            _ => (state >> 20) as i32 % (1 << bits),
        }
    };
    let x: Vec<i32> = (0..m * k).map(|_| value()).collect();
    let y: Vec<i32> = (0..k * n).map(|_| value()).collect();
    let model = Model {
        inputs: vec![InputDecl {
            name: "x".into(),
            shape: vec![m as u32, k as u32],
            precision: 32,
        }],
        params: vec![ParamDecl {
            name: "y".into(),
            shape: vec![k as u32, n as u32],
            precision: 32,
            data: ParamData::I32(y.clone()),
        }],
        nodes: vec![Node {
            name: "d".into(),
            op: ops::by_name("Dot").unwrap().code,
            inputs: vec![ValueRef::Input(0), ValueRef::Param(0)],
            attrs: vec![Attr {
                name: "frac_bits".into(),
                value: AttrValue::Int(i64::from(f)),
            }],
        }],
        outputs: vec![OutputDecl {
            name: "d".into(),
            value: ValueRef::Node { node: 0, output: 0 },
        }],
    }
    .encode();
    let inputs = [InputTensor {
        shape: vec![m as u32, k as u32],
        data: x.clone(),
    }];
    let report =
        common::run_both(wasm, &model, &inputs, u64::MAX, Schedule::NEWEST.version).unwrap();
    let Status::Ok { outputs } = report.outcome.status else {
        panic!("{report:?}");
    };
    let expected: Vec<i32> = (0..m * n)
        .map(|at| {
            let (row, column) = (at / n, at % n);
            let sum: i128 = (0..k)
                .map(|i| i128::from(x[row * k + i]) * i128::from(y[i * n + column]))
                .sum();
            i32::try_from(rescale(sum, f)).unwrap()
        })
        .collect();
    assert_eq!(outputs[0].data, expected, "K = {k}, F = {f}");
}
