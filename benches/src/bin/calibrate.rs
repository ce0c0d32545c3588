//! The gas calibration tool: measures what every operator costs and how well its gas follows,
//! and writes the table of `docs/gas-calibration.md` (and, with `--runs`, `docs/gas-runs.md`).
//!
//! ```text
//! cargo run -p cvm-benches --release --bin calibrate -- [--ops A,B] [--quick] [--output FILE]
//! cargo run -p cvm-benches --release --bin calibrate -- --runs [--ops A,B] [--output FILE]
//! ```
//!
//! **Cases.** For every operator of `OPS` (a missing one is an error: the tool refuses to run),
//! one or more configurations (kernel sizes and channel counts of conv2d, dense and CINN `Conv`,
//! including depthwise and 1×1; pooling windows; reduction axes; broadcasting; ...) are built as
//! single-node models at four sizes: tiny (about 16 elements of work), small (1 K), medium (64 K)
//! and large (1 M; see `calibrate/cases.rs`). Inputs are int8 where the operator takes integers,
//! Q16 inside each CINN function's domain otherwise, generated reproducibly. A size whose run is
//! predicted (from the size below, by its gas) to burn more than 2^31 fuel (2^30 under `--quick`)
//! is halved until it fits, or skipped.
//!
//! **Measurements.** Each model runs natively and in a fresh `engine.wasm` instance; both must
//! agree. The fuel of the first run in a fresh instance is the instruction count (exactly
//! reproducible); wall times are medians over repeated runs (short runs batched so a sample lasts
//! at least 500 µs).
//!
//! **Isolating the node.** Each case is measured as built and with m more copies of its node
//! (same operands, outputs unused), and the node costs (multi − single) / m in fuel and in wall
//! time; the two models' samples alternate and the node's time is the median of the paired
//! differences, which cancels drift in the machine's speed.
//!
//! **Ratios and proposal.** Fuel per gas and wasm ns per gas are normalised to their median over
//! all rows, and grouped by the row of the schedule's table that prices them (operator and
//! class). Each node's cost is converted to gas at the medians (the geometric mean of its fuel
//! and its wasm time), and each table row's base and the rates of the columns it prices are
//! fitted to its nodes by non-negative least squares on relative errors (`calibrate/fit.rs`).
//! Copying the proposal into `gas/src/lib.rs` (under a new schedule version once one is
//! published) and measuring again closes the loop.
//!
//! **Whole runs (`--runs`).** Every configuration at the small, medium and large sizes, alone and as a
//! chain of the same node, run as `cvm run` runs a model (a fresh instance: the first growth
//! and touch of the arena included), the run phase timed against an interleaved reference
//! model; the runs' time per gas, and the run prices they propose, go to `docs/gas-runs.md`
//! (`calibrate/runs.rs`).
//!
//! Exit status: 0 on success, 2 on bad arguments, 1 when a case fails to build, validate or run
//! (the other cases are still measured and written, the failures listed in the file).

// Calibration is off-chain statistics (medians, logarithms, least squares) over measurements;
// floating point never reaches the engine or the gas crate.
#![allow(clippy::float_arithmetic)]

#[path = "../calibrate/mod.rs"]
mod calibrate;

use std::process::ExitCode;

use calibrate::cli::{self, USAGE};

fn main() -> ExitCode {
    let options = match cli::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("calibrate: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if options.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let outcome = if options.runs {
        calibrate::runs::run(&options)
    } else {
        calibrate::run(&options)
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("calibrate: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use cvm_engine::ops::OPS;

    use super::calibrate::cases::{self, TINY};
    use cvm_engine::model::ValueRef;

    use super::calibrate::cli;
    use super::calibrate::prepare_case;
    use super::calibrate::runs;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    /// Every operator has a configuration; every configuration's tiny case validates and runs
    /// natively.
    #[test]
    fn tiny_cases_cover_every_operator_and_run() {
        let configs = cases::configs().unwrap();
        for op in OPS {
            assert!(
                configs.iter().any(|c| c.op == op.name),
                "{} has no case",
                op.name
            );
        }
        for config in &configs {
            let class = config.fixed_class.unwrap_or(TINY.name);
            let (built, validated, _) =
                prepare_case(config, class, TINY.target).unwrap_or_else(|e| panic!("{e}"));
            let report = cvm_engine::run(&validated, built.inputs, u64::MAX);
            assert!(
                report.error_code().is_none(),
                "{} fails: {:?}",
                config.label(),
                report.failure
            );
        }
    }

    #[test]
    fn options_parse() {
        let options = cli::parse(args("--quick --ops conv2d,Exp --output x.md")).unwrap();
        assert!(options.quick);
        assert_eq!(
            options.ops,
            Some(vec!["conv2d".to_string(), "Exp".to_string()])
        );
        assert_eq!(options.output, std::path::PathBuf::from("x.md"));
        let options = cli::parse(args("")).unwrap();
        assert_eq!(
            options.output,
            std::path::PathBuf::from("docs/gas-calibration.md")
        );
        let options = cli::parse(args("--runs --ops relu")).unwrap();
        assert!(options.runs);
        assert_eq!(options.output, std::path::PathBuf::from("docs/gas-runs.md"));
    }

    /// A node that keeps its operand's type chains; one that changes it does not.
    #[test]
    fn chains_link_each_node_to_the_previous_one() {
        let configs = cases::configs().unwrap();
        let config = |op: &str| configs.iter().find(|c| c.op == op).unwrap();
        let relu = config("relu").build(TINY.target).unwrap();
        let chained = runs::chain(&relu, runs::CHAIN).unwrap();
        assert_eq!(chained.nodes.len() as u64, runs::CHAIN);
        assert_eq!(chained.nodes[0].inputs, relu.model.nodes[0].inputs);
        for (i, node) in chained.nodes.iter().enumerate().skip(1) {
            let previous = ValueRef::Node {
                node: i as u32 - 1,
                output: 0,
            };
            assert_eq!(node.inputs, vec![previous]);
        }
        let last = ValueRef::Node {
            node: runs::CHAIN as u32 - 1,
            output: 0,
        };
        assert_eq!(chained.outputs[0].value, last);
        let sum = config("sum").build(cases::MEDIUM.target).unwrap();
        assert!(runs::chain(&sum, runs::CHAIN).is_none());
    }

    /// Runs whose time is exactly their node gas plus a known run cost give that run cost back
    /// as the proposal, and the median time per gas normalises them to 1.
    #[test]
    fn run_prices_are_recovered_from_exact_runs() {
        let [input, output, arena] = [5.0, 3.5, 3.0];
        let rows: Vec<runs::RunRow> = (0..24u64)
            .map(|i| {
                let elements = [
                    1000 + 1000 * i,
                    1000 + 6000 * (i % 5),
                    2000 + 7000 * (i % 7),
                ];
                let node_gas = 10_000 + 5_000 * (i % 3);
                let cost = node_gas as f64
                    + 9_000.0
                    + input * elements[0] as f64
                    + output * elements[1] as f64
                    + arena * elements[2] as f64;
                runs::RunRow {
                    label: format!("case {i}"),
                    size: "small",
                    nodes: 1,
                    gas: cost as u64,
                    run_gas: cost as u64 - node_gas,
                    elements,
                    // At 0.5 ns per gas against a reference of 1 ms.
                    ratio: cost * 0.5 / 1e6,
                    samples: 3,
                }
            })
            .collect();
        let measured = runs::Runs {
            rows,
            reference_ns: 1e6,
            failures: Vec::new(),
            elapsed: std::time::Duration::ZERO,
        };
        let (normalised, ns_per_gas) = runs::per_gas(&measured);
        assert!((ns_per_gas - 0.5).abs() < 1e-3, "{ns_per_gas}");
        assert!(normalised.iter().all(|v| (v - 1.0).abs() < 1e-3));
        let (base, rates) = runs::proposed_run(&measured, ns_per_gas);
        // Within 5 %: the fit draws each factor slightly towards today's rate.
        assert!(base.abs_diff(9_000) <= 450, "base {base}");
        for (rate, expected) in rates.iter().zip([500, 350, 300]) {
            assert!(rate.abs_diff(expected) * 100 <= 5 * expected, "{rates:?}");
        }
    }

    #[test]
    fn bad_options_are_errors() {
        for (text, expected) in [
            ("--ops conv3d", "unknown operator \"conv3d\""),
            ("--ops", "needs a value"),
            ("--output /no/such/dir/x.md", "does not exist"),
            ("--quick=1", "takes no value"),
            ("--runs --quick", "not to --runs"),
            ("--frobnicate", "unknown option"),
        ] {
            let error = cli::parse(args(text)).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
