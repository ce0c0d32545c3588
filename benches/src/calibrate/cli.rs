//! Command-line options of the calibration tool. Every malformed option is an error message
//! (the tool exits with status 2), never a panic.

use std::path::PathBuf;

use cvm_engine::ops::OPS;

/// The usage text.
pub const USAGE: &str = "\
usage: calibrate [options]

Measures every operator of the engine over a spread of shapes (wasm fuel and wall time, the
node's cost isolated from the run's fixed overhead), relates them to the gas of the newest
schedule, proposes the rates of every row of its table, and writes the result. With --runs,
measures whole runs instead and proposes the run prices.

options:
  --ops A,B,...       measure only these operators
  --quick             fewer size classes (no large), fewer repetitions
  --runs              measure whole runs instead, as `cvm run` runs a model (a fresh instance,
                      the run phase), alone and chained, and propose the run prices
  --output FILE       the generated file (default docs/gas-calibration.md, or
                      docs/gas-runs.md with --runs)
  -h, --help          print this text";

/// Parsed options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Operators to measure (all when `None`).
    pub ops: Option<Vec<String>>,
    /// Fewer size classes and repetitions.
    pub quick: bool,
    /// Measure whole runs (`calibrate/runs.rs`) instead of nodes.
    pub runs: bool,
    /// The generated file.
    pub output: PathBuf,
    /// Print the usage text and stop.
    pub help: bool,
    /// The arguments as given, for the generated file.
    pub command: String,
}

impl Options {
    /// Whether `--ops` selects operator `op` (every operator without `--ops`).
    pub fn selects(&self, op: &str) -> bool {
        self.ops
            .as_ref()
            .is_none_or(|ops| ops.iter().any(|name| name == op))
    }
}

fn output_path(value: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(value);
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    match parent {
        Some(dir) if !dir.is_dir() => Err(format!(
            "--output {value}: directory {} does not exist",
            dir.display()
        )),
        _ if value.is_empty() || path.is_dir() => {
            Err(format!("--output: \"{value}\" is not a file path"))
        }
        _ => Ok(path),
    }
}

/// Parses the arguments after the program name.
///
/// # Errors
/// A message naming the offending option: unknown options, missing or malformed values,
/// unknown operators, output paths in missing directories.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let args: Vec<String> = args.into_iter().collect();
    let mut options = Options {
        ops: None,
        quick: false,
        runs: false,
        output: PathBuf::new(),
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
        let takes_value = matches!(flag.as_str(), "--ops" | "--output");
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
            "--runs" => options.runs = true,
            "--output" => options.output = output_path(&value)?,
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
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if options.runs && options.quick {
        return Err("--quick applies to the node calibration, not to --runs".into());
    }
    if options.output.as_os_str().is_empty() {
        options.output = PathBuf::from(if options.runs {
            "docs/gas-runs.md"
        } else {
            "docs/gas-calibration.md"
        });
    }
    Ok(options)
}
