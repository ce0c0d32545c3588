//! Calibration of the `transcendental` gas weights: the cost per element of every CINN unary
//! math function (and of `Power`) in engine.wasm, measured in wasmtime fuel (one unit per wasm
//! instruction), relative to an element of `Add`.
//!
//! Each function runs as a one-node text model in Q16 over inputs spread evenly across a range
//! inside its domain, where it computes rather than saturates. A run's fuel includes fixed costs
//! (the call, decoding the model's inputs, dispatch, hashing the outcome); running every model at
//! 4096 and at 8192 elements and dividing the difference by 4096 leaves the cost of one element:
//! decoding and checking its input, the function, zero-filling, encoding and hashing its output.
//! The same figure for `Add(x, x)` (one input, like the unary models) is the unit.
//!
//! Under schedule v1 an element of a math function costs `element_arith` + `output_element` +
//! `transcendental` · weight = 2 + 16·weight gas, an element of `Add` 2 gas (read back here from
//! the runs' `gas_used`). `transcendental_weights_follow_measured_cost` prints, per function, the
//! fuel per element, its ratio to `Add`, the gas per element, the weight, the ratio of measured
//! cost to gas normalised to `Add`'s (1: charged exactly in proportion to `Add`) and the nearest
//! weight: of the two weights around the cost, the one whose gas is nearer in ratio. It asserts
//! that every normalised ratio lies within [0.5, 2]. Gas moves in steps of 8 `Add` elements, so a
//! cost between 2 and 4.5 `Add` elements (Rsqrt's) lies outside the band for weight 0 and for
//! weight 1; such a function must have the nearest weight instead. `Power` is charged for its
//! general path, exp(y·ln x) (`x^x`); integral exponents take an exact, much cheaper path (`x^3`,
//! shown, not asserted). `no_region_costs_more_than_twice_its_gas` measures the regions where a
//! cost departs from its mean (near 0, domain ends, saturation, `Power`'s exponent classes)
//! against the gas of the current schedule.
//!
//! The weights of `weight()` in `engine/src/ops/cinn_unary.rs` and `Power`'s in
//! `engine/src/ops/cinn_binary.rs` are the nearest weights of this table; docs/gas.md reproduces
//! both tables. `cargo test -p cvm-cli --test gas_weights -- --nocapture` prints them.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::Path;

use cvm_cli::runner::encode_inputs;
use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Schedule;
use cvm_runtime::wasm::{WasmEngine, WasmSession};
use serde_json::{Value, json};

/// Fractional bits of every measured model.
const F: u32 = 16;
/// One in Q16.
const ONE: i64 = 1 << F;
/// The two sizes whose difference cancels the fixed costs.
const SMALL: usize = 4096;
const LARGE: usize = 8192;
/// The schedule these weights are calibrated for; every model is loaded under it.
const SCHEDULE: u32 = 1;
/// Gas per element of `Add` under schedule v1: `element_arith` + `output_element`.
const ADD_GAS: u64 = 2;
/// Gas of one unit of weight: the cost of `transcendental` under schedule v1.
const TRANSCENDENTAL: u64 = 16;
/// Ratios are computed in thousandths (integer arithmetic only).
const MILLI: u64 = 1000;
/// Median fuel per gas of the calibration of the current schedule, in thousandths
/// (docs/gas.md, "Calibration").
const MEDIAN_MILLI_FUEL: u64 = 4_896;

/// A measured primitive: its operator, the inputs it reads and the range of x.
struct Case {
    op: &'static str,
    label: &'static str,
    /// Inclusive range of x in Q16, and as printed.
    range: (i64, i64),
    shown: &'static str,
    /// Second operand: `None` for unary functions; `Some(None)` for x itself (`Add(x, x)`,
    /// `Power(x, x)`); `Some(Some(v))` for a parameter filled with the Q16 value v.
    second: Option<Option<i64>>,
    /// Whether the weights test asserts the [0.5, 2] band for it (all but `Power`'s exact path).
    asserted: bool,
}

const fn unary(op: &'static str, lo: i64, hi: i64, shown: &'static str) -> Case {
    Case {
        op,
        label: op,
        range: (lo, hi),
        shown,
        second: None,
        asserted: true,
    }
}

/// Every CINN unary math function over a range inside its domain where it computes and its
/// results fit Q16, then `Power`.
fn cases() -> Vec<Case> {
    vec![
        unary("Acos", -ONE, ONE, "[-1, 1]"),
        unary("Acosh", ONE, 1000 * ONE, "[1, 1000]"),
        unary("Asin", -ONE, ONE, "[-1, 1]"),
        unary("Asinh", -1000 * ONE, 1000 * ONE, "[-1000, 1000]"),
        unary("Atan", -100 * ONE, 100 * ONE, "[-100, 100]"),
        unary("Atanh", -ONE + 1, ONE - 1, "(-1, 1)"),
        unary("Ceil", -1000 * ONE, 1000 * ONE, "[-1000, 1000]"),
        unary("Cos", -10 * ONE, 10 * ONE, "[-10, 10]"),
        unary("Cosh", -10 * ONE, 10 * ONE, "[-10, 10]"),
        // Beyond ±4.5 the result is ±1 without a series.
        unary("Erf", -9 * ONE / 2, 9 * ONE / 2, "[-4.5, 4.5]"),
        unary("Exp", -10 * ONE, 10 * ONE, "[-10, 10]"),
        unary("Floor", -1000 * ONE, 1000 * ONE, "[-1000, 1000]"),
        unary("Log", 1, 1000 * ONE, "(0, 1000]"),
        unary("Log10", 1, 1000 * ONE, "(0, 1000]"),
        unary("Log2", 1, 1000 * ONE, "(0, 1000]"),
        unary("Round", -1000 * ONE, 1000 * ONE, "[-1000, 1000]"),
        unary("Rsqrt", 1, 1000 * ONE, "(0, 1000]"),
        unary("Sin", -10 * ONE, 10 * ONE, "[-10, 10]"),
        unary("Sinh", -10 * ONE, 10 * ONE, "[-10, 10]"),
        unary("Sqrt", 0, 1000 * ONE, "[0, 1000]"),
        unary("Tan", -10 * ONE, 10 * ONE, "[-10, 10]"),
        unary("Tanh", -10 * ONE, 10 * ONE, "[-10, 10]"),
        unary("Trunc", -1000 * ONE, 1000 * ONE, "[-1000, 1000]"),
        // x^x: a non-integral exponent almost everywhere, exp(y·ln x) in Q120. The general
        // path, which Power's weight pays for whatever the exponents are.
        Case {
            op: "Power",
            label: "Power x^x",
            range: (1, 4 * ONE),
            shown: "(0, 4]",
            second: Some(None),
            asserted: true,
        },
        // x^3: an integral exponent, computed exactly and much faster; shown, not asserted.
        Case {
            op: "Power",
            label: "Power x^3",
            range: (-30 * ONE, 30 * ONE),
            shown: "[-30, 30]",
            second: Some(Some(3 * ONE)),
            asserted: false,
        },
    ]
}

/// Sub-ranges where a function's cost departs from its mean: near 0, at the ends of its domain,
/// where it saturates, and `Power`'s exponent classes.
fn regions() -> Vec<Case> {
    let power = |label, range, shown, exponent| Case {
        op: "Power",
        label,
        range,
        shown,
        second: Some(Some(exponent)),
        asserted: true,
    };
    vec![
        unary("Acos", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Acos", ONE * 15 / 16, ONE, "[15/16, 1]"),
        unary("Acosh", ONE, 2 * ONE, "[1, 2]"),
        unary("Acosh", 1000 * ONE, 30000 * ONE, "[1000, 30000]"),
        unary("Asin", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Asinh", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Asinh", 1000 * ONE, 30000 * ONE, "[1000, 30000]"),
        unary("Atan", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Atan", 1000 * ONE, 30000 * ONE, "[1000, 30000]"),
        unary("Atanh", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Atanh", ONE * 15 / 16, ONE - 1, "[15/16, 1)"),
        unary("Cos", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Cos", 10000 * ONE, 30000 * ONE, "[10000, 30000]"),
        unary("Cosh", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Cosh", 9 * ONE, 10 * ONE, "[9, 10]"),
        unary("Erf", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Erf", 3 * ONE, 4 * ONE, "[3, 4]"),
        unary("Erf", 4 * ONE, 5 * ONE, "[4, 5]"),
        unary("Erf", -1000 * ONE, 1000 * ONE, "[-1000, 1000]"),
        unary("Exp", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Exp", -30 * ONE, -20 * ONE, "[-30, -20]"),
        unary("Exp", 9 * ONE, 10 * ONE, "[9, 10]"),
        unary("Log", 1, ONE, "(0, 1]"),
        unary("Log", ONE - 256, ONE + 256, "1 ± 2^-8"),
        unary("Log", 1, 32767 * ONE, "(0, 32767]"),
        unary("Log2", 1, 32767 * ONE, "(0, 32767]"),
        unary("Log10", 1, 32767 * ONE, "(0, 32767]"),
        unary("Rsqrt", 1, 100, "(0, 100 ulp]"),
        unary("Rsqrt", 1, 32767 * ONE, "(0, 32767]"),
        unary("Sin", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Sin", -32767 * ONE, 32767 * ONE, "[-32767, 32767]"),
        unary("Sinh", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Sqrt", 0, 32767 * ONE, "[0, 32767]"),
        unary("Tan", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Tan", -3 * ONE / 2, 3 * ONE / 2, "[-1.5, 1.5]"),
        unary("Tanh", -ONE / 16, ONE / 16, "[-1/16, 1/16]"),
        unary("Tanh", 20 * ONE, 30000 * ONE, "[20, 30000]"),
        unary("Ceil", -32767 * ONE, 32766 * ONE, "[-32767, 32766]"),
        unary("Round", -32767 * ONE, 32766 * ONE, "[-32767, 32766]"),
        power("Power x^0.5", (1, 1000 * ONE), "(0, 1000]", ONE / 2),
        power("Power x^-1.5", (ONE, 1000 * ONE), "[1, 1000]", -3 * ONE / 2),
        power("Power x^2.25", (1, 100 * ONE), "(0, 100]", 9 * ONE / 4),
        power("Power x^64", (-ONE, ONE), "[-1, 1]", 64 * ONE),
        power("Power x^1", (-1000 * ONE, 1000 * ONE), "[-1000, 1000]", ONE),
    ]
}

/// The unit: `Add(x, x)`, one input like the unary functions.
fn add() -> Case {
    Case {
        op: "Add",
        label: "Add",
        range: (-1000 * ONE, 1000 * ONE),
        shown: "[-1000, 1000]",
        second: Some(None),
        asserted: true,
    }
}

/// n values spread evenly over [lo, hi].
fn spread(n: usize, (lo, hi): (i64, i64)) -> Vec<i32> {
    let last = (n - 1) as i64;
    (0..n as i64)
        .map(|i| i32::try_from(lo + (hi - lo) * i / last).expect("Q16 value fits i32"))
        .collect()
}

/// The one-node text model of `case` over n elements.
fn model(case: &Case, n: usize) -> Vec<u8> {
    let (node_inputs, params) = match case.second {
        None => (json!(["x"]), json!([])),
        Some(None) => (json!(["x", "x"]), json!([])),
        Some(Some(value)) => (
            json!(["x", "e"]),
            json!([{
                "name": "e",
                "shape": [n],
                "precision": 32,
                "data": vec![value; n],
            }]),
        ),
    };
    let text: Value = json!({
        "format": "cvm-text/1",
        "inputs": [{"name": "x", "shape": [n], "precision": 32}],
        "params": params,
        "nodes": [{
            "name": "y",
            "op": case.op,
            "inputs": node_inputs,
            "attrs": {"frac_bits": F},
        }],
        "outputs": ["y"],
    });
    cvm_formats::text::from_json(&text, Path::new("."))
        .unwrap_or_else(|e| panic!("{}: {e}", case.label))
        .encode()
}

/// (fuel, gas) of one run of `case` over n elements in a fresh session, under `schedule`.
fn measure(wasm: &WasmEngine, case: &Case, n: usize, schedule: u32) -> (u64, u64) {
    let mut session: WasmSession = wasm.session().expect("session");
    if let Some(report) = session
        .load_with_schedule(&model(case, n), schedule)
        .expect("load")
    {
        panic!("{} does not load: {:?}", case.label, report.failure);
    }
    let inputs = [InputTensor {
        shape: vec![n as u32],
        data: spread(n, case.range),
    }];
    let report = session.run(&encode_inputs(&inputs), u64::MAX).expect("run");
    assert!(
        report.error_code().is_none(),
        "{} over {n} elements failed: {:?}",
        case.label,
        report.failure
    );
    (session.fuel_used().expect("fuel"), report.outcome.gas_used)
}

/// (fuel per element, gas per element): the difference of the two sizes over their difference.
fn per_element(wasm: &WasmEngine, case: &Case, schedule: u32) -> (u64, u64) {
    let (fuel_small, gas_small) = measure(wasm, case, SMALL, schedule);
    let (fuel_large, gas_large) = measure(wasm, case, LARGE, schedule);
    let extra = (LARGE - SMALL) as u64;
    let fuel = fuel_large - fuel_small;
    let gas = gas_large - gas_small;
    assert_eq!(gas % extra, 0, "{}: gas is linear in elements", case.label);
    // Rounded to the nearest unit of fuel.
    ((fuel + extra / 2) / extra, gas / extra)
}

/// a / b in thousandths, rounded to nearest.
fn milli(a: u64, b: u64) -> u64 {
    (a * MILLI + b / 2) / b
}

/// Thousandths as "x.yyy".
fn show(thousandths: u64) -> String {
    format!("{}.{:03}", thousandths / MILLI, thousandths % MILLI)
}

/// Gas per element, in thousandths of `Add`'s, of weight w: (2 + 16·w) / 2.
fn charged(weight: u64) -> u64 {
    (ADD_GAS + TRANSCENDENTAL * weight) * MILLI / ADD_GAS
}

/// The weight whose gas is nearest in ratio to a cost (in thousandths of `Add`): of the two
/// weights around it, the one that minimises max(cost/gas, gas/cost).
fn nearest_weight(cost: u64) -> u64 {
    let step = charged(1) - charged(0);
    let low = cost.saturating_sub(charged(0)) / step;
    let (below, above) = (charged(low), charged(low + 1));
    if cost * cost > below * above {
        low + 1
    } else {
        low
    }
}

/// Whether cost / gas lies in [0.5, 2] (thousandths).
fn in_band(normalised: u64) -> bool {
    (MILLI / 2..=2 * MILLI).contains(&normalised)
}

#[test]
fn transcendental_weights_follow_measured_cost() {
    let wasm = WasmEngine::new().expect("engine");
    let add = add();
    let (add_fuel, add_gas) = per_element(&wasm, &add, SCHEDULE);
    assert_eq!(add_gas, ADD_GAS, "Add: element_arith + output_element");
    let mut lines = vec![
        format!(
            "Add(x, x), x in {}: {add_fuel} fuel per element = 1; {add_gas} gas per element",
            add.shown
        ),
        "| function  | x in Q16      | fuel/element | cost / Add | gas/element | weight | cost/gas vs Add | nearest weight |".to_string(),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |".to_string(),
    ];
    let mut outside = Vec::new();
    for case in cases() {
        let (fuel, gas) = per_element(&wasm, &case, SCHEDULE);
        let weight = (gas - ADD_GAS) / TRANSCENDENTAL;
        let cost = milli(fuel, add_fuel);
        let normalised = milli(cost, charged(weight));
        let nearest = nearest_weight(cost);
        lines.push(format!(
            "| {:<9} | {:<13} | {fuel:>12} | {:>10} | {gas:>11} | {weight:>6} | {:>15} | {nearest:>14} |",
            case.label,
            case.shown,
            show(cost),
            show(normalised)
        ));
        // Gas moves in steps of 8 Add elements: a cost between 2 and 4.5 Add elements lies
        // outside the band for weight 0 and for weight 1. Such a function must take the nearer
        // of the two in ratio.
        let reachable = (0..=64).any(|w| in_band(milli(cost, charged(w))));
        let acceptable = in_band(normalised) || (!reachable && weight == nearest);
        if case.asserted && !acceptable {
            outside.push(format!(
                "{} (cost/gas {}, weight {weight}, nearest {nearest})",
                case.label,
                show(normalised)
            ));
        }
    }
    eprintln!("{}", lines.join("\n"));
    assert!(
        outside.is_empty(),
        "measured cost / gas outside [0.5, 2] of Add's: {}",
        outside.join(", ")
    );
}

/// Gas never depends on values, so a function whose cost varies with its argument is charged
/// for its mean. This test measures the regions where the cost departs from that mean and
/// asserts that none costs more than twice what the current schedule charges it, relative to the
/// calibration's median fuel per gas (docs/gas.md, "Calibration"; the bound the calibration
/// holds every operator to). Cheaper regions, where a function saturates or takes a short path,
/// are overcharged, which is safe. Each element's cost includes decoding its input and encoding
/// its output, which the schedule's `output_element` covers.
#[test]
fn no_region_costs_more_than_twice_its_gas() {
    let wasm = WasmEngine::new().expect("engine");
    let mut lines = vec![
        "| function     | x in Q16        | fuel/element | gas/element | fuel/gas, normalised |"
            .to_string(),
        "| --- | --- | ---: | ---: | ---: |".to_string(),
    ];
    let mut dear = Vec::new();
    for case in regions() {
        let (fuel, gas) = per_element(&wasm, &case, Schedule::CURRENT.version);
        let normalised = milli(fuel * MILLI, gas * MEDIAN_MILLI_FUEL);
        lines.push(format!(
            "| {:<12} | {:<15} | {fuel:>12} | {gas:>11} | {:>20} |",
            case.label,
            case.shown,
            show(normalised)
        ));
        if normalised > 2 * MILLI {
            dear.push(format!(
                "{} on {} ({})",
                case.label,
                case.shown,
                show(normalised)
            ));
        }
    }
    eprintln!("{}", lines.join("\n"));
    assert!(
        dear.is_empty(),
        "regions costing more than twice their gas: {}",
        dear.join(", ")
    );
}
