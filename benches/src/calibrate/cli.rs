//! Command-line options of the calibration tool. Every malformed option is an error message
//! (the tool exits with status 2), never a panic.

use std::path::PathBuf;

use cvm_engine::gas::{Param, Schedule};
use cvm_engine::ops::OPS;

use super::fit::PARAMS;

/// The usage text.
pub const USAGE: &str = "\
usage: calibrate [options]

Measures every operator of the engine over a spread of shapes (wasm fuel, wasm and native wall
time, the node's cost isolated from the run's fixed overhead), prints fuel/gas and time/gas per
operator and shape class under a schedule, and proposes schedule costs.

options:
  --schedule N        evaluate schedule version N (default: the engine's current schedule)
  --costs P=C,...     evaluate these costs instead; parameters not listed keep the schedule's
                      (node_base, output_element, element_copy, element_arith,
                      multiply_accumulate, window_compare, transcendental, step,
                      mac_group, wide_multiply_accumulate)
  --ops A,B,...       measure only these operators (the proposal is fitted to them alone)
  --quick             fewer shape classes (no large), fewer repetitions
  --fit MEASURE       what the proposal follows: fuel (default), wasm or native (wall time)
  --markdown FILE     write the ratio table as markdown (for docs/gas.md)
  --json FILE         write the raw measurements as JSON
  -h, --help          print this text";

/// What a proposal is fitted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Wasm fuel (instructions): deterministic.
    Fuel,
    /// Wall time of the wasm run.
    Wasm,
    /// Wall time of the native run.
    Native,
}

impl Measure {
    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Measure::Fuel => "fuel",
            Measure::Wasm => "wasm",
            Measure::Native => "native",
        }
    }
}

/// Parsed options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Costs of the evaluated price list, per parameter in id order.
    pub costs: [u64; PARAMS],
    /// How the price list is named in reports.
    pub costs_label: String,
    /// Operators to measure (all when `None`).
    pub ops: Option<Vec<String>>,
    /// Fewer shape classes and repetitions.
    pub quick: bool,
    /// Markdown output file.
    pub markdown: Option<PathBuf>,
    /// JSON output file.
    pub json: Option<PathBuf>,
    /// What the proposal follows.
    pub fit: Measure,
    /// Print the usage text and stop.
    pub help: bool,
    /// The arguments as given, for the reports.
    pub command: String,
}

/// The costs of `schedule`, in parameter id order.
pub fn costs_of(schedule: &Schedule) -> [u64; PARAMS] {
    Param::ALL.map(|param| schedule.cost(param))
}

fn output_path(option: &str, value: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(value);
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    match parent {
        Some(dir) if !dir.is_dir() => Err(format!(
            "{option} {value}: directory {} does not exist",
            dir.display()
        )),
        _ if value.is_empty() || path.is_dir() => {
            Err(format!("{option}: \"{value}\" is not a file path"))
        }
        _ => Ok(path),
    }
}

fn parse_costs(value: &str, costs: &mut [u64; PARAMS]) -> Result<Vec<String>, String> {
    let mut changed = Vec::new();
    for item in value.split(',').filter(|item| !item.trim().is_empty()) {
        let (name, number) = item.split_once('=').ok_or_else(|| {
            format!("--costs: \"{item}\" is not PARAMETER=COST (for example node_base=100)")
        })?;
        let name = name.trim();
        let param = Param::ALL
            .iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Param::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "--costs: unknown parameter \"{name}\" (parameters: {})",
                    names.join(", ")
                )
            })?;
        let cost: u64 = number.trim().parse().map_err(|_| {
            format!("--costs: the cost of {name}, \"{number}\", is not a non-negative integer")
        })?;
        costs[param.id() as usize] = cost;
        changed.push(format!("{name}={cost}"));
    }
    if changed.is_empty() {
        return Err("--costs: no PARAMETER=COST given".into());
    }
    Ok(changed)
}

/// Parses the arguments after the program name.
///
/// # Errors
/// A message naming the offending option: unknown options, missing or malformed values,
/// unknown schedule versions, parameters or operators, output paths in missing directories.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let args: Vec<String> = args.into_iter().collect();
    let mut schedule: Option<u32> = None;
    let mut costs_option: Option<String> = None;
    let mut options = Options {
        costs: costs_of(Schedule::CURRENT),
        costs_label: String::new(),
        ops: None,
        quick: false,
        markdown: None,
        json: None,
        fit: Measure::Fuel,
        help: false,
        command: args.join(" "),
    };
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_string(), Some(value.to_string()))
            }
            _ => (arg.clone(), None),
        };
        let takes_value = matches!(
            flag.as_str(),
            "--schedule" | "--costs" | "--ops" | "--markdown" | "--json" | "--fit"
        );
        let value = if takes_value {
            match inline {
                Some(value) => value,
                None => iter.next().ok_or_else(|| format!("{flag} needs a value"))?,
            }
        } else {
            if inline.is_some() {
                return Err(format!("{flag} takes no value"));
            }
            String::new()
        };
        match flag.as_str() {
            "-h" | "--help" => options.help = true,
            "--quick" => options.quick = true,
            "--schedule" => {
                let version: u32 = value
                    .parse()
                    .map_err(|_| format!("--schedule: \"{value}\" is not a version number"))?;
                if Schedule::by_version(version).is_none() {
                    return Err(format!(
                        "--schedule: there is no schedule version {version}"
                    ));
                }
                schedule = Some(version);
            }
            "--costs" => costs_option = Some(value),
            "--ops" => {
                let names: Vec<String> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|name| !name.is_empty())
                    .map(String::from)
                    .collect();
                if names.is_empty() {
                    return Err("--ops: no operator given".into());
                }
                if let Some(unknown) = names.iter().find(|n| !OPS.iter().any(|op| op.name == *n)) {
                    return Err(format!(
                        "--ops: unknown operator \"{unknown}\" (names as in docs/ops.md, e.g. conv2d, Exp)"
                    ));
                }
                options.ops = Some(names);
            }
            "--markdown" => options.markdown = Some(output_path("--markdown", &value)?),
            "--json" => options.json = Some(output_path("--json", &value)?),
            "--fit" => {
                options.fit = match value.as_str() {
                    "fuel" => Measure::Fuel,
                    "wasm" => Measure::Wasm,
                    "native" => Measure::Native,
                    _ => {
                        return Err(format!(
                            "--fit: \"{value}\" is not one of fuel, wasm, native"
                        ));
                    }
                }
            }
            _ => return Err(format!("unknown option \"{arg}\"")),
        }
    }
    let base = schedule
        .and_then(Schedule::by_version)
        .unwrap_or(Schedule::CURRENT);
    options.costs = costs_of(base);
    options.costs_label = format!("schedule v{}", base.version);
    if let Some(value) = costs_option {
        let changed = parse_costs(&value, &mut options.costs)?;
        options.costs_label = format!("{} with {}", options.costs_label, changed.join(", "));
    }
    if options.costs.iter().all(|&c| c == 0) {
        return Err("--costs: every cost is 0; gas would be 0 for every node".into());
    }
    Ok(options)
}
