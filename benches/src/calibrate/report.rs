//! The calibration's outputs: text tables on stdout, the markdown table for `docs/gas.md`, and
//! the raw measurements as JSON.

use std::fmt::Write as _;

use cvm_engine::gas::Param;

use super::cli::{Measure, Options};
use super::fit::{PARAMS, Spread, in_band};
use super::json::Json;
use super::measure::RunCost;
use super::{Calibration, Evaluation, Proposal, Row};

const MEASURES: [Measure; 3] = [Measure::Fuel, Measure::Wasm, Measure::Native];

/// Short names of the parameters for the usage column.
const SHORT: [&str; PARAMS] = [
    "base", "out", "copy", "arith", "mac", "window", "trans", "step", "macg", "wmac", "step3",
    "step4", "wmac4", "step5", "macg5", "step6",
];

/// The usage as "base 1 + out 1024 + arith 1024".
pub fn usage_text(usage: &[u64; PARAMS]) -> String {
    usage
        .iter()
        .zip(SHORT)
        .filter(|(count, _)| **count > 0)
        .map(|(count, name)| format!("{name} {count}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

fn costs_text(costs: &[u64; PARAMS]) -> String {
    Param::ALL
        .iter()
        .zip(costs)
        .map(|(p, c)| format!("{}={c}", p.name()))
        .collect::<Vec<_>>()
        .join(",")
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"))
}

fn flags(normalised: [Option<f64>; 3]) -> String {
    normalised
        .iter()
        .zip(["F", "W", "N"])
        .filter(|(value, _)| value.is_some_and(|v| !in_band(v)))
        .map(|(_, flag)| flag)
        .collect()
}

fn spread_text(name: &str, spread: &Spread) -> String {
    format!(
        "{name:<7} median {:>10.4} per gas; normalised min {:.3}, p5 {:.3}, p95 {:.3}, max {:.3}; {} of {} rows outside [0.5, 2]",
        spread.median, spread.min, spread.p5, spread.p95, spread.max, spread.outside, spread.rows
    )
}

/// How the node's cost was isolated, with the range of the per-run overhead it removed.
pub fn method_text(rows: &[Row]) -> String {
    let mut shares: Vec<f64> = rows
        .iter()
        .map(|r| r.node.overhead_fuel() / r.node.single.fuel as f64)
        .collect();
    let copies: Vec<u64> = rows.iter().map(|r| r.node.copies).collect();
    format!(
        "Each node's cost is isolated by difference: the single-node model and the same model with \
         m more copies of the node (outputs unused) are measured, and the node costs \
         (multi − single) / m; the run's own work (decoding and checking inputs, encoding the \
         report, the wasm boundary) cancels. m = {} to {}. That overhead is {:.0}% to {:.0}% \
         (median {:.0}%) of the single-node run's fuel.\n",
        copies.iter().min().unwrap_or(&0),
        copies.iter().max().unwrap_or(&0),
        100.0 * shares.iter().copied().fold(f64::INFINITY, f64::min),
        100.0 * shares.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        100.0 * super::stats::median(&mut shares)
    )
}

/// The ratio table of `evaluation` as text.
pub fn table_text(rows: &[Row], evaluation: &Evaluation) -> String {
    let normalised = MEASURES.map(|m| evaluation.normalised(m));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<44} {:<10} {:>12} {:>13} {:>8} {:>6} {:>9} {:>6} {:>9} {:>6}  {:<5} usage",
        "operator (configuration)",
        "class",
        "gas",
        "node fuel",
        "fuel/gas",
        "norm",
        "wasm ns/g",
        "norm",
        "nat ns/g",
        "norm",
        "flags"
    );
    for (i, row) in rows.iter().enumerate() {
        let row_normalised = [normalised[0][i], normalised[1][i], normalised[2][i]];
        let _ = writeln!(
            out,
            "{:<44} {:<10} {:>12} {:>13.0} {:>8} {:>6} {:>9} {:>6} {:>9} {:>6}  {:<5} {}",
            row.label(),
            row.class,
            evaluation.gas[i],
            row.node.fuel,
            ratio(evaluation.fuel[i]),
            ratio(row_normalised[0]),
            ratio(evaluation.wasm[i]),
            ratio(row_normalised[1]),
            ratio(evaluation.native[i]),
            ratio(row_normalised[2]),
            flags(row_normalised),
            usage_text(&row.usage)
        );
    }
    let _ = writeln!(
        out,
        "flags: F fuel/gas, W wasm time/gas, N native time/gas outside [0.5, 2] of the median over all rows"
    );
    out
}

/// The spreads of `evaluation` as text.
pub fn spreads_text(evaluation: &Evaluation) -> String {
    let mut out = format!(
        "Spread under {} ({}):\n",
        evaluation.label,
        costs_text(&evaluation.costs)
    );
    for (measure, spread) in MEASURES.iter().zip(&evaluation.spreads) {
        let _ = writeln!(out, "  {}", spread_text(measure.name(), spread));
    }
    out
}

/// The rows whose normalised fuel/gas lies outside [0.5, 2], furthest first.
pub fn outside_text(rows: &[Row], evaluation: &Evaluation, measure: Measure) -> String {
    let normalised = evaluation.normalised(measure);
    let mut outside: Vec<(f64, usize)> = normalised
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.filter(|v| !in_band(*v)).map(|v| (v, i)))
        .collect();
    outside.sort_by(|a, b| a.0.ln().abs().total_cmp(&b.0.ln().abs()).reverse());
    let mut out = format!(
        "Rows outside [0.5, 2] in {}/gas under {}: {}\n",
        measure.name(),
        evaluation.label,
        outside.len()
    );
    for (value, i) in outside {
        let row = &rows[i];
        let _ = writeln!(
            out,
            "  {:<44} {:<10} {:>8.3}  ({})",
            row.label(),
            row.class,
            value,
            if value < 1.0 {
                "overcharged"
            } else {
                "undercharged"
            }
        );
    }
    out
}

/// "the whole" or "1/4".
fn unit_fraction(divisor: f64) -> String {
    if divisor <= 1.0 {
        "the whole".to_string()
    } else {
        format!("1/{divisor:.0}")
    }
}

/// The proposal as text.
pub fn proposal_text(proposal: &Proposal, start: &Evaluation, proposed: &Evaluation) -> String {
    let mut out = format!(
        "Proposed costs (fitted to {}; one gas is {} of the median {} per gas under {}, the coarsest unit at which integer costs lose less than 5% of the fit's quality):\n",
        proposal.measure.name(),
        unit_fraction(proposal.divisor),
        proposal.measure.name(),
        start.label
    );
    let _ = writeln!(
        out,
        "  {:<20} {:>8} {:>10} {:>8}",
        "parameter",
        start.label.split(' ').next_back().unwrap_or(""),
        "fit",
        "proposed"
    );
    for (p, param) in Param::ALL.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:<20} {:>8} {:>10.2} {:>8}",
            param.name(),
            start.costs[p],
            proposal.continuous[p],
            proposal.costs[p]
        );
    }
    let _ = writeln!(
        out,
        "  per-node fixed cost on the tiny rows: {:.0} gas{}",
        proposal.fixed_cost,
        if proposal.raised_node_base {
            " (node_base raised to cover it)"
        } else {
            " (covered by node_base)"
        }
    );
    let _ = writeln!(out, "  --costs {}", costs_text(&proposal.costs));
    out.push_str(&spreads_text(proposed));
    out
}

/// Operators (configurations) the proposal leaves outside [0.5, 2] in `measure`, with what
/// their costs do across classes and the per-operator weight that would centre them.
pub fn diagnosis_text(rows: &[Row], evaluation: &Evaluation, measure: Measure) -> String {
    let normalised = evaluation.normalised(measure);
    let mut out = format!(
        "Configurations outside [0.5, 2] in {}/gas under {}:\n",
        measure.name(),
        evaluation.label
    );
    let mut start = 0;
    while start < rows.len() {
        let end = (start..rows.len())
            .find(|&i| rows[i].op != rows[start].op || rows[i].config != rows[start].config)
            .unwrap_or(rows.len());
        let group: Vec<usize> = (start..end).filter(|&i| normalised[i].is_some()).collect();
        start = end;
        if !group
            .iter()
            .any(|&i| normalised[i].is_some_and(|v| !in_band(v)))
        {
            continue;
        }
        let (Some(&first), Some(&last)) = (group.first(), group.last()) else {
            continue;
        };
        let cost = |i: usize| rows[i].cost(measure).unwrap_or(f64::NAN);
        let gas = |i: usize| evaluation.gas[i] as f64;
        let growth = if group.len() > 1 && gas(last) > gas(first) {
            format!(
                "cost grows as gas^{:.2}",
                (cost(last) / cost(first)).ln() / (gas(last) / gas(first)).ln()
            )
        } else {
            "one class".to_string()
        };
        let shares: Vec<(f64, &str)> = rows[last]
            .usage
            .iter()
            .zip(evaluation.costs)
            .zip(Param::ALL)
            .map(|((&u, c), p)| ((u as f64) * (c as f64) / gas(last), p.name()))
            .collect();
        let (share, dominant) = shares
            .iter()
            .copied()
            .fold((0.0, ""), |best, s| if s.0 > best.0 { s } else { best });
        let classes: Vec<String> = group
            .iter()
            .map(|&i| format!("{} {:.3}", rows[i].class, normalised[i].unwrap_or(f64::NAN)))
            .collect();
        let _ = writeln!(
            out,
            "  {:<44} {}; {growth}; {dominant} is {:.0}% of the gas at {}; weight ×{:.2} would centre {}",
            rows[first].label(),
            classes.join(", "),
            100.0 * share,
            rows[last].class,
            normalised[last].unwrap_or(f64::NAN),
            rows[last].class
        );
    }
    out
}

fn cell(value: Option<f64>) -> String {
    match value {
        Some(v) if in_band(v) => format!("{v:.2}"),
        Some(v) => format!("**{v:.2}**"),
        None => "–".to_string(),
    }
}

/// The ratio table of `evaluation` as markdown, and the proposal.
pub fn markdown(
    options: &Options,
    calibration: &Calibration,
    evaluation: &Evaluation,
    proposal: Option<(&Proposal, &Evaluation)>,
) -> String {
    let rows = &calibration.rows;
    let normalised = MEASURES.map(|m| evaluation.normalised(m));
    let [fuel, wasm, native] = &evaluation.spreads;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Measured with `cargo run -p cvm-benches --release --bin calibrate --{}{}` under {}. \
         Fuel is the node's wasm instructions and wall times the medians of repeated runs, each \
         isolated by difference (the single-node model against the same model with extra copies \
         of the node, which cancels decoding the inputs and encoding the outputs). \
         Each ratio is normalised to its median over all {} rows: {:.3} fuel, {:.3} ns (wasm) and \
         {:.3} ns (native) per gas. Values outside [0.5, 2] are in bold.\n",
        if options.command.is_empty() { "" } else { " " },
        options.command,
        evaluation.label,
        rows.len(),
        fuel.median,
        wasm.median,
        native.median
    );
    out.push_str("| operator | shape class | gas | fuel | fuel/gas, normalised | wall (wasm)/gas, normalised | wall (native)/gas, normalised |\n");
    out.push_str("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (i, row) in rows.iter().enumerate() {
        let operator = if row.config.is_empty() {
            format!("`{}`", row.op)
        } else {
            format!("`{}` ({})", row.op, row.config)
        };
        let _ = writeln!(
            out,
            "| {operator} | {} | {} | {:.0} | {} | {} | {} |",
            row.class,
            evaluation.gas[i],
            row.node.fuel,
            cell(normalised[0][i]),
            cell(normalised[1][i]),
            cell(normalised[2][i])
        );
    }
    let _ = writeln!(
        out,
        "\nOutside [0.5, 2]: {} of {} rows in fuel/gas, {} in wasm time/gas, {} in native time/gas.",
        fuel.outside, fuel.rows, wasm.outside, native.outside
    );
    if !calibration.failures.is_empty() {
        let _ = writeln!(
            out,
            "\nCases that failed (missing above): {}.",
            calibration.failures.join("; ")
        );
    }
    if let Some((proposal, proposed)) = proposal {
        let _ = writeln!(
            out,
            "\nProposed costs, fitted to {} (robust fit of the log-ratios; one gas is {} of the median {} per gas under {}):\n",
            proposal.measure.name(),
            unit_fraction(proposal.divisor),
            proposal.measure.name(),
            evaluation.label
        );
        out.push_str("| parameter | current | proposed |\n| --- | ---: | ---: |\n");
        for (p, param) in Param::ALL.iter().enumerate() {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                param.name(),
                evaluation.costs[p],
                proposal.costs[p]
            );
        }
        let [f, w, n] = &proposed.spreads;
        let _ = writeln!(
            out,
            "\nUnder the proposal, normalised fuel/gas spans {:.2} to {:.2} ({} of {} rows outside [0.5, 2]); wasm time/gas {:.2} to {:.2} ({} outside); native time/gas {:.2} to {:.2} ({} outside).",
            f.min, f.max, f.outside, f.rows, w.min, w.max, w.outside, n.min, n.max, n.outside
        );
    }
    out
}

fn costs_json(costs: &[u64; PARAMS]) -> Json {
    Json::Obj(
        Param::ALL
            .iter()
            .zip(costs)
            .map(|(p, &c)| (p.name().to_string(), Json::Int(c)))
            .collect(),
    )
}

fn run_json(run: &RunCost) -> Json {
    Json::obj([
        ("fuel", Json::Int(run.fuel)),
        ("fuel_warm", Json::Int(run.fuel_warm)),
        ("fuel_jitter", Json::Int(run.fuel_jitter)),
        ("wasm_ns", Json::Num(run.wasm_ns)),
        ("native_ns", Json::Num(run.native_ns)),
        (
            "samples",
            Json::Arr(vec![
                Json::Int(run.samples.0 as u64),
                Json::Int(run.samples.1 as u64),
            ]),
        ),
        (
            "runs_per_sample",
            Json::Arr(vec![Json::Int(run.batch.0), Json::Int(run.batch.1)]),
        ),
    ])
}

fn shapes_json(shapes: &[Vec<u32>]) -> Json {
    Json::Arr(
        shapes
            .iter()
            .map(|s| Json::Arr(s.iter().map(|&d| Json::Int(u64::from(d))).collect()))
            .collect(),
    )
}

fn spread_json(spread: &Spread) -> Json {
    Json::obj([
        ("median", Json::Num(spread.median)),
        ("min", Json::Num(spread.min)),
        ("p5", Json::Num(spread.p5)),
        ("p95", Json::Num(spread.p95)),
        ("max", Json::Num(spread.max)),
        ("outside", Json::Int(spread.outside as u64)),
        ("rows", Json::Int(spread.rows as u64)),
    ])
}

fn evaluation_json(evaluation: &Evaluation) -> Json {
    Json::obj([
        ("label", Json::str(evaluation.label.clone())),
        ("costs", costs_json(&evaluation.costs)),
        (
            "spread",
            Json::Obj(
                MEASURES
                    .iter()
                    .zip(&evaluation.spreads)
                    .map(|(m, s)| (m.name().to_string(), spread_json(s)))
                    .collect(),
            ),
        ),
    ])
}

/// The raw measurements and both evaluations as JSON.
pub fn json(
    options: &Options,
    calibration: &Calibration,
    evaluation: &Evaluation,
    proposal: Option<(&Proposal, &Evaluation)>,
) -> String {
    let normalised = MEASURES.map(|m| evaluation.normalised(m));
    let proposed = proposal.map(|(_, proposed)| MEASURES.map(|m| proposed.normalised(m)));
    let rows = calibration
        .rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let under_proposal = proposed.as_ref().map_or(Json::Null, |values| {
                Json::obj([
                    (
                        "gas",
                        Json::Num(proposal.map_or(0.0, |(_, p)| p.gas[i] as f64)),
                    ),
                    ("fuel", Json::opt(values[0][i])),
                    ("wasm_ns", Json::opt(values[1][i])),
                    ("native_ns", Json::opt(values[2][i])),
                ])
            });
            Json::obj([
                ("op", Json::str(row.op)),
                ("config", Json::str(row.config)),
                ("class", Json::str(row.class)),
                ("target", Json::Int(row.target)),
                ("operands", shapes_json(&row.operand_shapes)),
                ("outputs", shapes_json(&row.output_shapes)),
                ("usage", costs_json(&row.usage)),
                ("copies", Json::Int(row.node.copies)),
                ("single", run_json(&row.node.single)),
                ("multi", run_json(&row.node.multi)),
                (
                    "node",
                    Json::obj([
                        ("fuel", Json::Num(row.node.fuel)),
                        ("wasm_ns", Json::Num(row.node.wasm_ns)),
                        ("native_ns", Json::Num(row.node.native_ns)),
                        ("overhead_fuel", Json::Num(row.node.overhead_fuel())),
                    ]),
                ),
                ("gas", Json::Num(evaluation.gas[i] as f64)),
                (
                    "per_gas",
                    Json::obj([
                        ("fuel", Json::opt(evaluation.fuel[i])),
                        ("wasm_ns", Json::opt(evaluation.wasm[i])),
                        ("native_ns", Json::opt(evaluation.native[i])),
                    ]),
                ),
                (
                    "normalised",
                    Json::obj([
                        ("fuel", Json::opt(normalised[0][i])),
                        ("wasm_ns", Json::opt(normalised[1][i])),
                        ("native_ns", Json::opt(normalised[2][i])),
                    ]),
                ),
                ("under_proposal", under_proposal),
            ])
        })
        .collect();
    let mut members = vec![
        ("command", Json::str(options.command.clone())),
        ("quick", Json::Bool(options.quick)),
        ("elapsed_s", Json::Num(calibration.elapsed.as_secs_f64())),
        ("evaluated", evaluation_json(evaluation)),
        ("rows", Json::Arr(rows)),
        (
            "failures",
            Json::Arr(
                calibration
                    .failures
                    .iter()
                    .map(|s| Json::str(s.clone()))
                    .collect(),
            ),
        ),
        (
            "skipped",
            Json::Arr(
                calibration
                    .skipped
                    .iter()
                    .map(|s| Json::str(s.clone()))
                    .collect(),
            ),
        ),
    ];
    if let Some((proposal, proposed)) = proposal {
        members.push((
            "proposal",
            Json::obj([
                ("fitted_to", Json::str(proposal.measure.name())),
                (
                    "continuous",
                    Json::Obj(
                        Param::ALL
                            .iter()
                            .zip(proposal.continuous)
                            .map(|(p, c)| (p.name().to_string(), Json::Num(c)))
                            .collect(),
                    ),
                ),
                ("unit_divisor", Json::Num(proposal.divisor)),
                ("fixed_cost_gas", Json::Num(proposal.fixed_cost)),
                ("evaluation", evaluation_json(proposed)),
            ]),
        ));
    }
    Json::obj(members).render()
}
