//! The gas calibration tool: measures what every operator costs and how well its gas follows.
//!
//! ```text
//! cargo run -p cvm-benches --release --bin calibrate -- [--schedule N | --costs P=C,...]
//!     [--ops A,B] [--quick] [--fit fuel|wasm|native] [--markdown FILE] [--json FILE]
//! ```
//!
//! **Cases.** For every operator of `OPS` (a missing one is an error: the tool refuses to run),
//! one or more configurations (kernel sizes and channel counts of conv2d, dense and CINN `Conv`,
//! including depthwise and 1×1; pooling windows; reduction axes; broadcasting; ...) are built as
//! single-node models at four shape classes: tiny (about 16 elements of work), small (1 K),
//! medium (64 K) and large (1 M), where "work" is what drives the operator's gas (output
//! elements, input elements of a reduction, weight elements of dense, pairs of rows of
//! non_max_suppression, anchors of generate_proposals_v2; see `calibrate/cases.rs`).
//! `generate_proposals_v2` also runs the realistic case of `fixtures/models/proposals`. Inputs are
//! int8 where the operator takes integers, Q16 inside each CINN function's domain otherwise,
//! generated reproducibly. A class whose run is predicted (from the class below, by its gas
//! under schedule v1) to burn more than 2^31 fuel (2^30 under `--quick`) is halved until it
//! fits, or skipped.
//!
//! **Measurements.** Each model runs natively (`cvm_engine::run`) and in a fresh `engine.wasm`
//! instance (`WasmSession::run`); both must succeed with the same outcome. The fuel of the first
//! run in a fresh instance is the instruction count (exactly reproducible; later runs of one
//! instance vary slightly with the allocator's state); wall times are medians over repeated runs
//! (short runs batched so a sample lasts at least 500 µs).
//!
//! **Isolating the node.** A run also decodes and checks its inputs, encodes the report and
//! crosses the wasm boundary, often more work than a cheap node (the tool prints the range).
//! That overhead is removed by difference: each case is measured as built and with m more copies
//! of its node (same operands and attributes, outputs unused, so each is dead right after it
//! runs and the copies take turns in the same arena elements), and the node costs
//! (multi − single) / m in fuel and in both wall times. Everything but the copies is identical in
//! the two models and cancels, but for the arena of the model with copies, larger by one node's
//! outputs, zeroed once per run (1/m of that per copy); what is left is what gas charges a node
//! for: dispatch, zeroing its outputs in the arena, the kernel. m is chosen (1 to 32) so the
//! copies outweigh the overhead about three times, within a fuel budget; the two models'
//! wall-time samples alternate, and the node's time is the median of the paired differences,
//! which cancels drift in the machine's speed.
//!
//! **Ratios.** Each row's usage (the operator's `usage` from the validated node, plus node_base
//! and output_element, checked against the gas validation charged) is priced under the evaluated
//! costs (`--schedule`, default the current schedule, or `--costs`). Fuel per gas and ns per gas
//! are normalised to their median over all rows; rows outside [0.5, 2] are flagged.
//!
//! **Proposal.** Per-parameter costs are fitted so that the normalised ratios (fuel by default,
//! `--fit` for wall time) are as tight as possible: a robust (Huber) least-squares fit of the
//! log-ratios in which every operator weighs the same, then scaled so that the median fuel per
//! gas is that of the evaluated schedule, rounded to integers ≥ 1, refined by coordinate descent,
//! and node_base raised if needed to cover the per-node fixed cost measured on the tiny rows
//! (see `calibrate/fit.rs`). The ratio table under the proposal follows, with the configurations
//! it still leaves outside the band, their growth exponent and the weight that would centre them.
//!
//! Exit status: 0 on success, 2 on bad arguments, 1 when a case fails to build, validate or run
//! (the other cases are still measured and reported, the failures listed at the end and in the
//! markdown and JSON outputs).

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
    match calibrate::run(&options) {
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
    use super::calibrate::cli::{self, Measure};
    use super::calibrate::prepare_case;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    /// Every operator has a configuration; every configuration's tiny case validates and runs
    /// natively; its recomputed usage prices at the gas validation charged.
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
        let options = cli::parse(args("--quick --ops conv2d,Exp --fit wasm")).unwrap();
        assert!(options.quick);
        assert_eq!(
            options.ops,
            Some(vec!["conv2d".to_string(), "Exp".to_string()])
        );
        assert_eq!(options.fit, Measure::Wasm);
        assert_eq!(
            options.costs,
            [400, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 3, 1]
        );
        let options =
            cli::parse(args("--schedule=1 --costs node_base=300,element_copy=2")).unwrap();
        assert_eq!(
            options.costs,
            [300, 1, 2, 1, 2, 1, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            options.costs_label,
            "schedule v1 with node_base=300, element_copy=2"
        );
    }

    #[test]
    fn bad_options_are_errors() {
        for (text, expected) in [
            ("--schedule 9", "no schedule version 9"),
            ("--schedule x", "not a version number"),
            ("--costs node_base", "not PARAMETER=COST"),
            ("--costs gas=3", "unknown parameter \"gas\""),
            ("--costs node_base=-1", "not a non-negative integer"),
            ("--ops conv3d", "unknown operator \"conv3d\""),
            ("--ops", "needs a value"),
            ("--fit time", "not one of fuel, wasm, native"),
            ("--markdown /no/such/dir/x.md", "does not exist"),
            ("--quick=1", "takes no value"),
            ("--frobnicate", "unknown option"),
        ] {
            let error = cli::parse(args(text)).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
