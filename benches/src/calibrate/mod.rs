//! The gas calibration tool: measures every operator over a spread of shapes, relates the
//! measured cost of each node to its gas, and proposes schedule costs. The method is described
//! in the binary's documentation (`src/bin/calibrate.rs`).

pub mod cases;
pub mod cli;
pub mod fit;
pub mod json;
pub mod measure;
pub mod report;
pub mod stats;

use std::time::{Duration, Instant};

use cvm_engine::ValidatedModel;
use cvm_engine::gas::{Param, Schedule};
use cvm_runtime::wasm::WasmEngine;

use cases::{Built, CLASSES, Class, Config};
use cli::{Measure, Options};
use fit::{PARAMS, Point};
use measure::{NodeCost, Timing};

/// Most fuel the single-node run of a case may burn: a class whose predicted fuel exceeds it is
/// shrunk (halving its target) or, when it would no longer exceed the class below, skipped.
const FUEL_CAP: u64 = 1 << 31;
/// The same under `--quick`.
const QUICK_FUEL_CAP: u64 = 1 << 30;

/// Sampling of the full run.
const FULL_TIMING: Timing = Timing {
    budget: Duration::from_millis(250),
    min_samples: 3,
    max_samples: 41,
    min_sample: Duration::from_micros(500),
    copies_fuel: 1 << 31,
};

/// Sampling under `--quick`.
const QUICK_TIMING: Timing = Timing {
    budget: Duration::from_millis(15),
    min_samples: 3,
    max_samples: 7,
    min_sample: Duration::from_micros(200),
    copies_fuel: 1 << 28,
};

/// One measured operator, configuration and shape class.
#[derive(Clone, Debug)]
pub struct Row {
    /// Operator name.
    pub op: &'static str,
    /// Configuration ("" when the operator has one).
    pub config: &'static str,
    /// Shape class.
    pub class: &'static str,
    /// Target the model was built for (after any shrinking for the fuel cap).
    pub target: u64,
    /// Shapes of the node's operands.
    pub operand_shapes: Vec<Vec<u32>>,
    /// Output shapes.
    pub output_shapes: Vec<Vec<u32>>,
    /// The node's usage: count per parameter (node_base and output_element included).
    pub usage: [u64; PARAMS],
    /// The measurements and the node's cost by difference.
    pub node: NodeCost,
}

impl Row {
    /// "op" or "op (config)".
    pub fn label(&self) -> String {
        cases::label(self.op, self.config)
    }

    /// The node's measured cost in `measure`, when positive (a wall-time difference lost in
    /// noise may not be).
    pub fn cost(&self, measure: Measure) -> Option<f64> {
        let value = match measure {
            Measure::Fuel => self.node.fuel,
            Measure::Wasm => self.node.wasm_ns,
            Measure::Native => self.node.native_ns,
        };
        (value > 0.0).then_some(value)
    }

    /// Usage counts as floats, for the fit.
    pub fn usage_f64(&self) -> [f64; PARAMS] {
        self.usage.map(|c| c as f64)
    }
}

/// Gas of `usage` under `costs`, in `u128` (no overflow for any count the engine accepts).
pub fn price(usage: &[u64; PARAMS], costs: &[u64; PARAMS]) -> u128 {
    usage
        .iter()
        .zip(costs)
        .map(|(&u, &c)| u128::from(u) * u128::from(c))
        .sum()
}

/// The node's usage as validation prices it ([`ValidatedModel::usage_of`]), as an array by
/// parameter id; checked against the gas validation charged.
fn usage_of(model: &ValidatedModel) -> Result<[u64; PARAMS], String> {
    let node = model
        .nodes
        .first()
        .ok_or("the calibration model has no node")?;
    let mut usage = [0u64; PARAMS];
    for (param, count) in model.usage_of(node).map_err(|e| e.to_string())? {
        usage[param.id() as usize] += count;
    }
    let engine_costs = cli::costs_of(model.schedule);
    if price(&usage, &engine_costs) != u128::from(node.gas) {
        return Err(format!(
            "the recomputed usage prices at {} gas, validation charged {}",
            price(&usage, &engine_costs),
            node.gas
        ));
    }
    Ok(usage)
}

/// A case ready to measure.
struct Prepared {
    built: Built,
    validated: ValidatedModel,
    usage: [u64; PARAMS],
    /// Gas under schedule v1: the work proxy used to predict fuel between classes.
    work: u128,
}

/// Builds and validates the case of `config` at `class`/`target`, and computes its usage.
///
/// # Errors
/// If the model does not build or validate: a bug of the case builders.
pub fn prepare_case(
    config: &Config,
    class: &str,
    target: u64,
) -> Result<(Built, ValidatedModel, [u64; PARAMS]), String> {
    let built = config.build(target)?;
    let bytes = built.model.encode();
    let validated = ValidatedModel::from_bytes(&bytes).map_err(|e| {
        format!(
            "{} {class}: the model does not validate: {e}",
            config.label()
        )
    })?;
    let usage = usage_of(&validated).map_err(|e| format!("{} {class}: {e}", config.label()))?;
    Ok((built, validated, usage))
}

fn prepare(config: &Config, class: &str, target: u64) -> Result<Prepared, String> {
    let (built, validated, usage) = prepare_case(config, class, target)?;
    let work = price(&usage, &cli::costs_of(&Schedule::V1));
    Ok(Prepared {
        built,
        validated,
        usage,
        work,
    })
}

/// The class measured last for a configuration.
struct Previous {
    target: u64,
    /// Gas under schedule v1.
    work: u128,
    /// Fuel of the single-node run.
    fuel: u64,
    usage: [u64; PARAMS],
}

/// The classes measured: all four, or tiny to medium under `--quick`.
pub fn classes(quick: bool) -> &'static [Class] {
    if quick { &CLASSES[..3] } else { &CLASSES }
}

/// Everything a calibration run produced.
pub struct Calibration {
    /// Measured rows, in the order of the operator table.
    pub rows: Vec<Row>,
    /// Classes not measured, and why.
    pub skipped: Vec<String>,
    /// Cases that failed to build, validate or run (the configuration's larger classes are not
    /// attempted).
    pub failures: Vec<String>,
    /// Wall time of the whole measurement.
    pub elapsed: Duration,
}

/// Measures every configuration of the selected operators. A case that fails is recorded in
/// [`Calibration::failures`] and the others go on.
///
/// # Errors
/// When the configurations do not cover the operator table, or wasmtime cannot start.
pub fn measure_all(options: &Options) -> Result<Calibration, String> {
    let started = Instant::now();
    let configs: Vec<Config> = cases::configs()?
        .into_iter()
        .filter(|c| {
            options
                .ops
                .as_ref()
                .is_none_or(|ops| ops.iter().any(|op| op == c.op))
        })
        .collect();
    let timing = if options.quick {
        QUICK_TIMING
    } else {
        FULL_TIMING
    };
    let cap = if options.quick {
        QUICK_FUEL_CAP
    } else {
        FUEL_CAP
    };
    let engine = WasmEngine::new().map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut failures = Vec::new();
    for (index, config) in configs.iter().enumerate() {
        let measured_classes: Vec<(&'static str, u64)> = match config.fixed_class {
            Some(name) => vec![(name, 0)],
            None => classes(options.quick)
                .iter()
                .map(|c| (c.name, c.target))
                .collect(),
        };
        let mut previous: Option<Previous> = None;
        for (class, target) in measured_classes {
            let progress = format!("[{:>3}/{}]", index + 1, configs.len());
            let context = |e: String| format!("{} {class}: {e}", config.label());
            match measure_class(
                &engine,
                config,
                class,
                target,
                previous.as_ref(),
                cap,
                &timing,
                &progress,
            ) {
                Ok(Measured::Row(row, measured)) => {
                    rows.push(*row);
                    previous = Some(measured);
                }
                Ok(Measured::Skipped(why)) => skipped.push(context(why)),
                Err(error) => {
                    // The larger classes of this configuration would fail the same way.
                    eprintln!("failed: {error}");
                    failures.push(context(error));
                    break;
                }
            }
        }
    }
    Ok(Calibration {
        rows,
        skipped,
        failures,
        elapsed: started.elapsed(),
    })
}

/// What measuring one class gave.
enum Measured {
    /// A row, and what the next class predicts its fuel from.
    Row(Box<Row>, Previous),
    /// Not measured, and why.
    Skipped(String),
}

/// Builds the case of `config` at `class` (shrinking it below the fuel cap, predicted from the
/// class measured `below`) and measures it.
///
/// # Errors
/// The case does not build, validate or run, or the engines disagree.
#[allow(clippy::too_many_arguments)]
fn measure_class(
    engine: &WasmEngine,
    config: &Config,
    class: &'static str,
    mut target: u64,
    below: Option<&Previous>,
    cap: u64,
    timing: &Timing,
    progress: &str,
) -> Result<Measured, String> {
    let mut prepared = prepare(config, class, target)?;
    if let Some(below) = below {
        // Fuel grows about as the class's gas under v1 does.
        let predict = |work: u128| below.fuel as f64 * work as f64 / below.work as f64;
        while predict(prepared.work) > cap as f64 && target / 2 > below.target {
            target /= 2;
            prepared = prepare(config, class, target)?;
        }
        if prepared.usage == below.usage {
            return Ok(Measured::Skipped(
                "the same model as the class below".into(),
            ));
        }
        if predict(prepared.work) > cap as f64 {
            return Ok(Measured::Skipped(format!(
                "a run would burn more than {cap} fuel"
            )));
        }
    }
    eprint!("{progress} {} {class} (target {target})… ", config.label());
    let node = measure::node_cost(
        engine,
        &prepared.built.model,
        &prepared.built.inputs,
        timing,
    )?;
    let validated = &prepared.validated;
    let row = Row {
        op: config.op,
        config: config.name,
        class,
        target,
        operand_shapes: validated.nodes[0]
            .inputs
            .iter()
            .map(|&id| validated.value_types[id].dims().to_vec())
            .collect(),
        output_shapes: validated.nodes[0]
            .output_types
            .iter()
            .map(|t| t.dims().to_vec())
            .collect(),
        usage: prepared.usage,
        node,
    };
    eprintln!(
        "node: fuel {:.0}, wasm {:.0} ns, native {:.0} ns ({} copies)",
        row.node.fuel, row.node.wasm_ns, row.node.native_ns, row.node.copies
    );
    let measured = Previous {
        target,
        work: prepared.work,
        fuel: row.node.single.fuel,
        usage: row.usage,
    };
    Ok(Measured::Row(Box::new(row), measured))
}

/// Measured cost per gas of every row under one price list, for each measure.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// How the price list is named.
    pub label: String,
    /// The costs, per parameter in id order.
    pub costs: [u64; PARAMS],
    /// Gas of every row.
    pub gas: Vec<u128>,
    /// Fuel per gas of every row (None where the node's cost is not positive).
    pub fuel: Vec<Option<f64>>,
    /// Wasm ns per gas.
    pub wasm: Vec<Option<f64>>,
    /// Native ns per gas.
    pub native: Vec<Option<f64>>,
    /// Spread of each ratio (fuel, wasm, native).
    pub spreads: [fit::Spread; 3],
}

impl Evaluation {
    /// Prices every row under `costs` and relates it to the measured costs.
    pub fn new(rows: &[Row], costs: [u64; PARAMS], label: String) -> Evaluation {
        let gas: Vec<u128> = rows.iter().map(|r| price(&r.usage, &costs)).collect();
        let ratios = |measure: Measure| -> Vec<Option<f64>> {
            rows.iter()
                .zip(&gas)
                .map(|(row, &g)| row.cost(measure).filter(|_| g > 0).map(|c| c / g as f64))
                .collect()
        };
        let (fuel, wasm, native) = (
            ratios(Measure::Fuel),
            ratios(Measure::Wasm),
            ratios(Measure::Native),
        );
        let spread_of = |values: &[Option<f64>]| {
            fit::spread(&values.iter().flatten().copied().collect::<Vec<_>>())
        };
        let spreads = [spread_of(&fuel), spread_of(&wasm), spread_of(&native)];
        Evaluation {
            label,
            costs,
            gas,
            fuel,
            wasm,
            native,
            spreads,
        }
    }

    /// The ratios of `measure`, normalised to their median over all rows.
    pub fn normalised(&self, measure: Measure) -> Vec<Option<f64>> {
        let (values, spread) = match measure {
            Measure::Fuel => (&self.fuel, &self.spreads[0]),
            Measure::Wasm => (&self.wasm, &self.spreads[1]),
            Measure::Native => (&self.native, &self.spreads[2]),
        };
        values
            .iter()
            .map(|v| v.map(|v| v / spread.median))
            .collect()
    }
}

/// A proposed price list.
#[derive(Clone, Debug)]
pub struct Proposal {
    /// What it was fitted to.
    pub measure: Measure,
    /// The gas unit is the evaluated schedule's median cost per gas divided by this.
    pub divisor: f64,
    /// The continuous fit, scaled to the gas unit, before rounding.
    pub continuous: [f64; PARAMS],
    /// The integer costs.
    pub costs: [u64; PARAMS],
    /// The per-node fixed cost measured on the tiny rows, in gas of the proposal.
    pub fixed_cost: f64,
    /// Whether node_base was raised to cover it.
    pub raised_node_base: bool,
}

/// The gas units tried for a proposal, as divisors of the evaluated schedule's median cost per
/// gas.
const UNIT_DIVISORS: [f64; 6] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];

/// How much worse than the continuous fit the integer costs may be at the chosen unit.
const ROUNDING_LOSS: f64 = 1.05;

/// Fits a price list to the rows' costs in `measure`, starting from `start`; the gas unit is
/// the evaluated schedule's (its median cost per gas), or a power-of-two fraction of it where
/// integers that coarse would lose more than 5 % of the fit's quality.
pub fn propose(rows: &[Row], measure: Measure, start: &[u64; PARAMS]) -> Option<Proposal> {
    let mut per_op: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
    for row in rows.iter().filter(|r| r.cost(measure).is_some()) {
        *per_op.entry(row.op).or_default() += 1.0;
    }
    let points: Vec<Point> = rows
        .iter()
        .filter_map(|row| {
            row.cost(measure).map(|cost| Point {
                // Only the parameters the evaluated schedule prices: the counts of the other
                // schedule versions ride along in every usage and must not be fitted.
                usage: std::array::from_fn(|p| {
                    if start[p] > 0 {
                        row.usage_f64()[p]
                    } else {
                        0.0
                    }
                }),
                cost,
                weight: 1.0 / per_op.get(row.op).copied().unwrap_or(1.0),
            })
        })
        .collect();
    if points.len() < PARAMS {
        return None;
    }
    let start_f64 = start.map(|c| c.max(1) as f64);
    let fitted = fit::fit(&points, &start_f64);
    // The gas unit: the evaluated schedule's median cost per gas, divided by the smallest power
    // of two at which rounding to integers costs less than ROUNDING_LOSS of the fit's quality.
    let unit = fit::median_ratio(&points, &start_f64);
    let best = fit::objective(&points, &fitted);
    let mut candidates = Vec::new();
    for divisor in UNIT_DIVISORS {
        let (continuous, costs) = fit::integer_costs(&points, &fitted, unit / divisor, start);
        let loss = fit::objective(&points, &costs.map(|c| c as f64));
        candidates.push((divisor, loss, continuous, costs));
        if loss <= best * ROUNDING_LOSS {
            break;
        }
    }
    // The loop stopped at the first acceptable unit; when none was, the least lossy one.
    let accepted = candidates
        .last()
        .is_some_and(|c| c.1 <= best * ROUNDING_LOSS);
    let (divisor, _, continuous, mut costs) = if accepted {
        candidates.pop()?
    } else {
        candidates.into_iter().min_by(|a, b| a.1.total_cmp(&b.1))?
    };
    // node_base must pay for what a node costs before any element: on the tiny rows, the cost
    // beyond what the other parameters charge, in gas at the proposal's unit.
    let unit_now = fit::median_ratio(&points, &costs.map(|c| c as f64));
    let base = Param::NodeBase.id() as usize;
    let mut fixed: Vec<f64> = rows
        .iter()
        .filter(|row| row.class == cases::TINY.name)
        .filter_map(|row| {
            row.cost(measure).map(|cost| {
                let others = price(&row.usage, &costs)
                    - u128::from(costs[base]) * u128::from(row.usage[base]);
                cost / unit_now - others as f64
            })
        })
        .collect();
    let fixed_cost = stats::median(&mut fixed);
    let raised_node_base = fixed_cost.is_finite() && (costs[base] as f64) < fixed_cost;
    if raised_node_base {
        costs[base] = fixed_cost.ceil() as u64;
    }
    Some(Proposal {
        measure,
        divisor,
        continuous,
        costs,
        fixed_cost,
        raised_node_base,
    })
}

/// Measures, evaluates the chosen price list, proposes one, prints the tables and writes the
/// requested files.
///
/// # Errors
/// Measurement failures (see [`measure_all`]), files that cannot be written, and, after the
/// tables and files, any case that failed.
pub fn run(options: &Options) -> Result<(), String> {
    let calibration = measure_all(options)?;
    let rows = &calibration.rows;
    let evaluation = Evaluation::new(rows, options.costs, options.costs_label.clone());
    let operators: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.op).collect();
    println!(
        "Gas calibration: {} rows over {} operators in {:.0} s{}\n",
        rows.len(),
        operators.len(),
        calibration.elapsed.as_secs_f64(),
        if options.quick { " (--quick)" } else { "" }
    );
    print!("{}", report::method_text(rows));
    println!(
        "Fuel is that of a fresh instance's first run, exactly reproducible (warm runs of one instance differ by up to {} instructions with the allocator's state; not used).",
        rows.iter()
            .map(|r| r.node.single.fuel_jitter.max(r.node.multi.fuel_jitter))
            .max()
            .unwrap_or(0)
    );
    println!("\nRatio table under {}:", evaluation.label);
    print!("{}", report::table_text(rows, &evaluation));
    println!();
    print!("{}", report::spreads_text(&evaluation));
    println!();
    print!("{}", report::outside_text(rows, &evaluation, options.fit));
    let proposal = propose(rows, options.fit, &options.costs);
    let proposed = proposal
        .as_ref()
        .map(|p| Evaluation::new(rows, p.costs, String::from("the proposal")));
    match (&proposal, &proposed) {
        (Some(proposal), Some(proposed)) => {
            println!();
            print!("{}", report::proposal_text(proposal, &evaluation, proposed));
            println!("\nRatio table under the proposal:");
            print!("{}", report::table_text(rows, proposed));
            println!();
            print!("{}", report::diagnosis_text(rows, proposed, options.fit));
        }
        _ => println!("\nToo few rows to fit {} parameters: no proposal.", PARAMS),
    }
    if !calibration.skipped.is_empty() {
        println!("\nNot measured:");
        for line in &calibration.skipped {
            println!("  {line}");
        }
    }
    let both = proposal.as_ref().zip(proposed.as_ref());
    if let Some(path) = &options.markdown {
        std::fs::write(
            path,
            report::markdown(options, &calibration, &evaluation, both),
        )
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &options.json {
        std::fs::write(path, report::json(options, &calibration, &evaluation, both))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if calibration.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} case(s) failed, their operators are missing from the tables:\n  {}",
            calibration.failures.len(),
            calibration.failures.join("\n  ")
        ))
    }
}
