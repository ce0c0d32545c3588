//! The gas calibration tool: measures every operator over a spread of shapes, relates the
//! measured cost of each node (and of each whole run) to its gas, proposes the rates of every
//! row of the schedule's table, and writes the result to a generated file. The method is
//! described in the binary's documentation (`src/bin/calibrate.rs`).

pub mod cases;
pub mod cli;
pub mod fit;
pub mod measure;
pub mod runs;
pub mod stats;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use cvm_engine::ValidatedModel;
use cvm_engine::gas::{RATE_SCALE, Rates, Schedule, Usage, Work};
use cvm_runtime::wasm::WasmEngine;

use cases::{Built, CLASSES, Class, Config};
use cli::Options;
use measure::{NodeCost, Timing};

/// The schedule the tool evaluates: the newest.
pub const SCHEDULE: &Schedule = Schedule::NEWEST;

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

/// The fairness band: measured cost per gas within [0.5, 2] × the median.
pub fn in_band(normalised: f64) -> bool {
    (0.5..=2.0).contains(&normalised)
}

/// One measured operator, configuration and size class.
#[derive(Clone, Debug)]
pub struct Row {
    /// Operator name.
    pub op: &'static str,
    /// Configuration ("" when the operator has one).
    pub config: &'static str,
    /// Size class (tiny, small, medium, large, or a fixed case's name).
    pub size: &'static str,
    /// The node's usage: its price class and work.
    pub usage: Usage,
    /// The node's gas.
    pub gas: u64,
    /// The measurements and the node's cost by difference.
    pub node: NodeCost,
}

impl Row {
    /// "op" or "op (config)".
    pub fn label(&self) -> String {
        cases::label(self.op, self.config)
    }
}

/// Builds and validates the case of `config` at `size`/`target`, and gives its node's usage and
/// gas.
///
/// # Errors
/// If the model does not build or validate: a bug of the case builders.
pub fn prepare_case(
    config: &Config,
    size: &str,
    target: u64,
) -> Result<(Built, ValidatedModel, Usage), String> {
    let built = config.build(target)?;
    let context = |e: String| format!("{} {size}: {e}", config.label());
    let validated = ValidatedModel::from_bytes(&built.model.encode(), SCHEDULE)
        .map_err(|e| context(format!("the model does not validate: {e}")))?;
    let node = validated
        .nodes
        .first()
        .ok_or_else(|| context("the calibration model has no node".into()))?;
    let usage = validated
        .usage_of(node)
        .map_err(|e| context(e.to_string()))?;
    Ok((built, validated, usage))
}

/// The class measured last for a configuration.
struct Previous {
    target: u64,
    gas: u64,
    /// Fuel of the single-node run.
    fuel: u64,
    work: Work,
}

/// The size classes measured: all four, or tiny to medium under `--quick`.
pub fn classes(quick: bool) -> &'static [Class] {
    if quick { &CLASSES[..3] } else { &CLASSES }
}

/// Everything a calibration run produced.
pub struct Calibration {
    /// Measured rows, in the order of the operator table.
    pub rows: Vec<Row>,
    /// Classes not measured, and why.
    pub skipped: Vec<String>,
    /// Cases that failed to build, validate or run.
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
        .filter(|c| options.selects(c.op))
        .collect();
    let (timing, cap) = if options.quick {
        (QUICK_TIMING, QUICK_FUEL_CAP)
    } else {
        (FULL_TIMING, FUEL_CAP)
    };
    let engine = WasmEngine::new().map_err(|e| e.to_string())?;
    let mut calibration = Calibration {
        rows: Vec::new(),
        skipped: Vec::new(),
        failures: Vec::new(),
        elapsed: Duration::ZERO,
    };
    for (index, config) in configs.iter().enumerate() {
        let sizes: Vec<(&'static str, u64)> = match config.fixed_class {
            Some(name) => vec![(name, 0)],
            None => classes(options.quick)
                .iter()
                .map(|c| (c.name, c.target))
                .collect(),
        };
        let mut previous: Option<Previous> = None;
        for (size, target) in sizes {
            let progress = format!("[{:>3}/{}]", index + 1, configs.len());
            let context = |e: String| format!("{} {size}: {e}", config.label());
            match measure_size(
                &engine,
                config,
                (size, target),
                previous.as_ref(),
                cap,
                &timing,
                &progress,
            ) {
                Ok(Some((row, measured))) => {
                    calibration.rows.push(row);
                    previous = Some(measured);
                }
                Ok(None) => calibration.skipped.push(context(
                    "too large, or the same model as the size below".into(),
                )),
                Err(error) => {
                    eprintln!("failed: {error}");
                    calibration.failures.push(context(error));
                    break;
                }
            }
        }
    }
    calibration.elapsed = started.elapsed();
    Ok(calibration)
}

/// Builds the case of `config` at `size` (shrinking it below the fuel cap, predicted from the
/// size measured `below`) and measures it; `None` when it is skipped.
///
/// # Errors
/// The case does not build, validate or run, or the engines disagree.
fn measure_size(
    engine: &WasmEngine,
    config: &Config,
    (size, mut target): (&'static str, u64),
    below: Option<&Previous>,
    cap: u64,
    timing: &Timing,
    progress: &str,
) -> Result<Option<(Row, Previous)>, String> {
    let mut prepared = prepare_case(config, size, target)?;
    if let Some(below) = below {
        // Fuel grows about as gas does.
        let predict = |gas: u64| below.fuel as f64 * gas as f64 / below.gas.max(1) as f64;
        let gas = |p: &(Built, ValidatedModel, Usage)| p.1.nodes[0].gas;
        while predict(gas(&prepared)) > cap as f64 && target / 2 > below.target {
            target /= 2;
            prepared = prepare_case(config, size, target)?;
        }
        if prepared.2.work == below.work || predict(gas(&prepared)) > cap as f64 {
            return Ok(None);
        }
    }
    let (built, validated, usage) = prepared;
    eprint!("{progress} {} {size} (target {target})… ", config.label());
    let node = measure::node_cost(engine, &built.model, &built.inputs, timing)?;
    eprintln!(
        "node: fuel {:.0}, wasm {:.0} ns ({} copies)",
        node.fuel, node.wasm_ns, node.copies
    );
    let row = Row {
        op: config.op,
        config: config.name,
        size,
        usage,
        gas: validated.nodes[0].gas,
        node,
    };
    let measured = Previous {
        target,
        gas: row.gas,
        fuel: row.node.single.fuel,
        work: row.usage.work,
    };
    Ok(Some((row, measured)))
}

/// Cost per gas of every row, normalised to the median over all rows.
pub struct Ratios {
    /// Per row: node fuel per gas and node wasm time per gas, each normalised to its median.
    pub rows: Vec<[Option<f64>; 2]>,
    /// The medians: fuel per gas and ns per gas of nodes.
    pub medians: [f64; 2],
}

/// The ratios of `rows` ([`Ratios`]).
pub fn ratios(rows: &[Row]) -> Ratios {
    let raw: Vec<[Option<f64>; 2]> = rows
        .iter()
        .map(|row| {
            let per = |cost: f64, gas: u64| (cost > 0.0 && gas > 0).then(|| cost / gas as f64);
            [per(row.node.fuel, row.gas), per(row.node.wasm_ns, row.gas)]
        })
        .collect();
    let medians = [0, 1].map(|i| {
        let mut values: Vec<f64> = raw.iter().filter_map(|r| r[i]).collect();
        stats::median(&mut values)
    });
    Ratios {
        rows: raw
            .iter()
            .map(|r| [0, 1].map(|i| r[i].map(|v| v / medians[i])))
            .collect(),
        medians,
    }
}

/// One row of the schedule's table as measured: its rows' normalised ratios, the prices it has
/// and the prices proposed.
pub struct Group {
    /// Operator and price class.
    pub key: (&'static str, &'static str),
    /// Measured rows.
    pub rows: usize,
    /// Median normalised node fuel per gas and wasm time per gas of its rows.
    pub node: [f64; 2],
    /// The schedule's base and rates.
    pub prices: (u64, Rates),
    /// The proposed base and rates ([`propose`]).
    pub proposed: (u64, Rates),
}

/// The rates as an array, in the table's column order.
fn rate_columns(r: &Rates) -> [u64; 7] {
    [r.mac, r.read, r.write, r.tap, r.pair, r.eval, r.slice]
}

/// The work as an array, in the table's column order.
fn work_columns(w: &Work) -> [u64; 7] {
    [
        w.macs, w.reads, w.writes, w.taps, w.pairs, w.evals, w.slices,
    ]
}

/// The measured cost of a row's node in gas at the medians: the geometric mean of its fuel and
/// its wasm time, each converted at the median per gas over all rows.
fn node_cost(row: &Row, medians: &[f64; 2]) -> f64 {
    let fuel = row.node.fuel / medians[0];
    let wasm = row.node.wasm_ns / medians[1];
    match (fuel > 0.0, wasm > 0.0) {
        (true, true) => (fuel * wasm).sqrt(),
        (true, false) => fuel,
        (false, true) => wasm,
        (false, false) => f64::NAN,
    }
}

/// The least base the tool proposes: every node is dispatched and views its operands.
const LEAST_BASE: f64 = 100.0;
/// The least factor by which the tool scales a rate in one proposal: a priced unit of work
/// never becomes free because the rows measured happen not to need it.
const LEAST_FACTOR: f64 = 0.25;

/// The terms of a fit: a base of at least [`LEAST_BASE`], then `factors` factors of at least
/// [`LEAST_FACTOR`], each drawn towards 1 (today's rate).
pub(crate) fn terms(factors: usize) -> Vec<fit::Term> {
    let base = fit::Term {
        lower: LEAST_BASE,
        prior: None,
    };
    let factor = fit::Term {
        lower: LEAST_FACTOR,
        prior: Some(1.0),
    };
    core::iter::once(base)
        .chain(core::iter::repeat_n(factor, factors))
        .collect()
}

/// The prices that fit the `members` of a table row. The terms are the base and one factor per
/// set of columns the row prices today (its non-zero rates) whose work is proportional over the
/// members (so that the fit can tell them apart); each factor scales the rates of its columns.
/// They are fitted to the nodes' measured cost ([`node_cost`]) by least squares on relative
/// errors, the base at least [`LEAST_BASE`] and the factors at least [`LEAST_FACTOR`] and drawn
/// towards 1 (today's rate) where the rows cannot tell the terms apart.
pub fn propose(rows: &[Row], members: &[usize], medians: &[f64; 2]) -> (u64, Rates) {
    let Some(row) = members
        .first()
        .and_then(|&i| SCHEDULE.row(rows[i].op, rows[i].usage.class))
    else {
        return (0, Rates::default());
    };
    let rates = rate_columns(&row.rates);
    let works: Vec<[u64; 7]> = members
        .iter()
        .map(|&i| work_columns(&rows[i].usage.work))
        .collect();
    // Sets of priced columns whose work vectors are proportional.
    let mut sets: Vec<Vec<usize>> = Vec::new();
    for k in (0..7).filter(|&k| rates[k] > 0) {
        let proportional = |j: usize| {
            works.iter().all(|w| {
                u128::from(w[k]) * u128::from(works[0][j])
                    == u128::from(w[j]) * u128::from(works[0][k])
            })
        };
        match sets.iter_mut().find(|set| proportional(set[0])) {
            Some(set) => set.push(k),
            None => sets.push(vec![k]),
        }
    }
    let samples: Vec<(Vec<f64>, f64)> = members
        .iter()
        .zip(&works)
        .map(|(&i, work)| {
            let mut x = vec![1.0];
            x.extend(sets.iter().map(|set| {
                set.iter()
                    .map(|&k| (rates[k] * work[k]) as f64 / RATE_SCALE as f64)
                    .sum::<f64>()
            }));
            (x, node_cost(&rows[i], medians))
        })
        .collect();
    let Some(theta) = fit::bounded(&samples, &terms(sets.len())) else {
        return (row.base, row.rates);
    };
    let mut proposed = rates;
    for (set, factor) in sets.iter().zip(&theta[1..]) {
        for &k in set {
            proposed[k] = ((rates[k] as f64 * factor).round() as u64).max(1);
        }
    }
    let [mac, read, write, tap, pair, eval, slice] = proposed;
    (
        theta[0].round() as u64,
        Rates {
            mac,
            read,
            write,
            tap,
            pair,
            eval,
            slice,
        },
    )
}

/// Groups the rows by table row ([`Group`]).
pub fn groups(rows: &[Row], ratios: &Ratios) -> Vec<Group> {
    let mut by_key: BTreeMap<(&'static str, &'static str), Vec<usize>> = BTreeMap::new();
    for (index, row) in rows.iter().enumerate() {
        by_key
            .entry((row.op, row.usage.class))
            .or_default()
            .push(index);
    }
    by_key
        .into_iter()
        .map(|(key, members)| {
            let median_of = |measure: usize| {
                let mut values: Vec<f64> = members
                    .iter()
                    .filter_map(|&i| ratios.rows[i][measure])
                    .collect();
                stats::median(&mut values)
            };
            let prices = SCHEDULE
                .row(key.0, key.1)
                .map_or((0, Rates::default()), |row| (row.base, row.rates));
            Group {
                key,
                rows: members.len(),
                node: [median_of(0), median_of(1)],
                prices,
                proposed: propose(rows, &members, &ratios.medians),
            }
        })
        .collect()
}

/// A row's prices as the table writes them: the base, then the rates.
fn prices_text((base, rates): &(u64, Rates)) -> String {
    let [mac, read, write, tap, pair, eval, slice] = rate_columns(rates);
    format!(
        "{base:>6}, [{mac:>5}, {read:>5}, {write:>5}, {tap:>4}, {pair:>5}, {eval:>6}, {slice:>5}]"
    )
}

/// The machine the measurements ran on: processor, cores, operating system.
pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|name| name.trim().to_string())
        })
        .unwrap_or_else(|| "unknown processor".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cpu}, {cores} cores, {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// The generated file: conditions, the table of every schedule row with its measured ratios
/// and proposed rates, the rows outside the band, and every measured case.
pub fn markdown(options: &Options, calibration: &Calibration) -> String {
    let rows = &calibration.rows;
    let ratios = ratios(rows);
    let groups = groups(rows, &ratios);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Gas calibration of schedule {}\n\n\
         Generated by `{}`; do not edit. \
         `docs/gas.md` explains the units, the formulas and the method.\n\n\
         - Machine: {}.\n\
         - {} rows over {} table rows, measured in {:.0} s{}. Wall times are medians of \
         repeated runs on a machine that may be shared with other work. Whole runs, as a \
         validator pays for them, are measured by `--runs` (`docs/gas-runs.md`).\n\
         - Medians: node {:.3} fuel/gas and {:.3} ns/gas in wasm.\n",
        SCHEDULE.version,
        generated_by(options),
        machine(),
        rows.len(),
        groups.len(),
        calibration.elapsed.as_secs_f64(),
        if options.quick { " (`--quick`)" } else { "" },
        ratios.medians[0],
        ratios.medians[1],
    );
    let _ = writeln!(
        out,
        "Per row of the table: measured rows, the node's fuel per gas and wasm time per gas \
         (median over its rows, normalised to the median over all rows), the prices (gas per \
         node, then hundredths of gas per multiply-accumulate, read, write, tap, pair, \
         evaluation and slice) and the proposed prices, fitted to the nodes' cost. `!` marks a figure outside [0.5, 2].\n"
    );
    let _ = writeln!(
        out,
        "| operator | class | rows | fuel/gas | wasm/gas | prices | proposed |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---|---|");
    let mark = |v: f64| {
        if v.is_finite() && !in_band(v) {
            format!("{v:.2}!")
        } else {
            format!("{v:.2}")
        }
    };
    for group in &groups {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | `{}` | `{}` |",
            group.key.0,
            group.key.1,
            group.rows,
            mark(group.node[0]),
            mark(group.node[1]),
            prices_text(&group.prices),
            prices_text(&group.proposed)
        );
    }
    let outside: Vec<String> = groups
        .iter()
        .filter(|g| !(in_band(g.node[0]) && in_band(g.node[1])))
        .map(|g| format!("{} ({})", g.key.0, g.key.1))
        .collect();
    let _ = writeln!(
        out,
        "\nTable rows with a figure outside [0.5, 2]: {}.",
        if outside.is_empty() {
            "none".to_string()
        } else {
            outside.join(", ")
        }
    );
    let _ = writeln!(
        out,
        "\n## Measured rows\n\n| case | size | class | work | gas | fuel/gas | wasm/gas |\n\
         |---|---|---|---|---:|---:|---:|"
    );
    for (row, r) in rows.iter().zip(&ratios.rows) {
        let w = row.usage.work;
        let work = [
            ("mac", w.macs),
            ("read", w.reads),
            ("write", w.writes),
            ("tap", w.taps),
            ("pair", w.pairs),
            ("eval", w.evals),
            ("slice", w.slices),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
        let show = |v: Option<f64>| v.map_or("–".to_string(), mark);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.label(),
            row.size,
            row.usage.class,
            work,
            row.gas,
            show(r[0]),
            show(r[1])
        );
    }
    not_measured(
        &mut out,
        calibration.skipped.iter().chain(&calibration.failures),
    );
    out
}

/// The command that generates a file: `cargo run -p cvm-benches [--release] --bin calibrate --
/// <the arguments>`.
pub(crate) fn generated_by(options: &Options) -> String {
    let profile = if cfg!(debug_assertions) {
        ""
    } else {
        " --release"
    };
    format!(
        "cargo run -p cvm-benches{profile} --bin calibrate -- {}",
        options.command
    )
}

/// Appends the "Not measured" list of `lines`, if there are any.
pub(crate) fn not_measured<'a>(out: &mut String, lines: impl IntoIterator<Item = &'a String>) {
    let mut lines = lines.into_iter().peekable();
    if lines.peek().is_some() {
        let _ = writeln!(out, "\nNot measured:\n");
        for line in lines {
            let _ = writeln!(out, "- {line}");
        }
    }
}

/// Writes the generated file `text` to `--output`; then fails if any case in `failures` did.
///
/// # Errors
/// A file that cannot be written, and, after the file, any case that failed.
pub(crate) fn write_generated(
    options: &Options,
    text: &str,
    failures: &[String],
) -> Result<(), String> {
    std::fs::write(&options.output, text)
        .map_err(|e| format!("writing {}: {e}", options.output.display()))?;
    eprintln!("wrote {}", options.output.display());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} case(s) failed:\n  {}",
            failures.len(),
            failures.join("\n  ")
        ))
    }
}

/// Runs the calibration and writes the generated file.
///
/// # Errors
/// Measurement failures (see [`measure_all`]), a file that cannot be written, and, after the
/// file, any case that failed.
pub fn run(options: &Options) -> Result<(), String> {
    let calibration = measure_all(options)?;
    write_generated(
        options,
        &markdown(options, &calibration),
        &calibration.failures,
    )
}
