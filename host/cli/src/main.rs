//! The `cvm` command-line tool: run, estimate, inspect and build models.
//!
//! Exit status (a contract scripts rely on): 0 success; 1 a deterministic error of the model or
//! its inputs (the outcome is still printed and hashed); 2 a usage error or a node-local failure
//! (unreadable file, bad text model, wasm runtime failure), which is never hashed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cvm_cli::error::{FileLimit, HostError, read_file};
use cvm_cli::inputs::{InputArg, assign, read_input_quantized};
use cvm_cli::render;
use cvm_cli::runner::{
    EngineKind, LoadedModel, ModelSource, Timings, execute_timed, load_model, phase,
    validate_natively,
};
use cvm_engine::Report;
use cvm_engine::outcome::Status;
use cvm_formats::cvm::{self, CvmMeta};
use cvm_formats::npy;
use cvm_onnx::import::Quantization;
use cvm_runtime::hash::{HashAlgorithm, outcome_hash};
use cvm_runtime::wasm;

/// Writes to standard output; a closed pipe or a full disk is a node-local failure
/// ([`HostError::Output`], exit status 2), never a panic.
macro_rules! out {
    ($($arg:tt)*) => {
        write_stdout(format_args!($($arg)*))
    };
}

/// [`out!`] with a line break.
macro_rules! outln {
    ($($arg:tt)*) => {
        write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes to standard error. A failure to write there has nowhere to be reported: it is
/// ignored, and the exit status still says what happened.
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// [`err!`] with a line break.
macro_rules! errln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod commands;
use commands::audit::audit;
use commands::batch::{BatchFiles, run_batch};
use commands::generate::{GenerateOptions, generate};
use commands::model::{build, estimate, import, inspect};
use commands::onnx::{OnnxImport, import_onnx, is_onnx};
use commands::run::{RunOptions, run};
use commands::trace::{Operands, TraceRunOptions, diff_traces, run_node, trace};

/// Writes `text` to standard output and flushes it.
fn write_stdout(text: std::fmt::Arguments<'_>) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_fmt(text)
        .and_then(|()| stdout.flush())
        .map_err(|source| Failure::Host(HostError::Output(source)))
}

#[derive(Parser)]
#[command(
    name = "cvm",
    version,
    about = "Deterministic integer inference for blockchain virtual machines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model on inputs and print its outputs, gas used and outcome hash.
    Run {
        #[command(flatten)]
        model: ModelArgs,
        /// Input tensor: `FILE` (inputs in declared order) or `NAME=FILE`. Repeatable. With
        /// `--input-format cvm`, one file of raw CVM input bytes.
        #[arg(long = "input", value_name = "[NAME=]FILE")]
        inputs: Vec<String>,
        /// Input file format: .npy tensors, or the raw bytes `CVMAPIInference` takes (CVM
        /// models only: int8 when the input precision is ≤ 8, else int32; clipped on entry).
        #[arg(long, value_enum, default_value_t = Format::Npy)]
        input_format: Format,
        /// Format of `--output`: .npy tensors, or the bytes `CVMAPIInference` returns (CVM
        /// models only, with argmax/detection post-processing and head interleaving).
        #[arg(long, value_enum, default_value_t = Format::Npy)]
        output_format: Format,
        /// Read and write the int32 values of CVM bytes big endian, as chain data is.
        #[arg(long)]
        big_endian: bool,
        /// Engine build to run: wasm (consensus configuration) or native.
        #[arg(long, value_enum, default_value_t = EngineArg::Wasm)]
        engine: EngineArg,
        /// Stop with OutOfGas when the next node would take gas used past this limit. The default
        /// is the most gas one run may cost (2^33, about 6 s of wasm time), which every model
        /// that loads fits.
        #[arg(long, value_name = "N", default_value_t = cvm_engine::limits::MAX_GAS_PER_RUN)]
        gas_limit: u64,
        /// Hash function over the outcome bytes.
        #[arg(long, value_enum, default_value_t = HashArg::Sha3_256)]
        hash: HashArg,
        /// Print exactly one JSON object instead of the summary.
        #[arg(long)]
        json: bool,
        /// Write the outputs: as int32 .npy (FILE for a single output; with several, FILE's
        /// stem followed by `_<index>.npy` for each), or with `--output-format cvm` as one file of
        /// CVM output bytes. With `--batch`, (N, …) arrays: each output's shape with its leading
        /// 1 dropped, zeros for a failed sample.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// The quantization of a model imported from ONNX (its `quantization.json`), so that
        /// float32 `.npy` inputs are quantized as the import specifies. Read from the model's
        /// directory when it has one.
        #[arg(long, value_name = "FILE")]
        quantization: Option<PathBuf>,
        /// With `--output`: write the output as float32 (`q · scale` of the quantization)
        /// instead of int32.
        #[arg(long, requires = "output")]
        dequantize: bool,
        /// Print the duration of each phase (reading, compiling or loading the engine, model
        /// load, run, hashing, …) to stderr, in milliseconds; stdout is unchanged. With
        /// `--batch`, each run phase is the sum over the samples.
        #[arg(long)]
        timings: bool,
        /// Run every sample of the `--input` arrays through one loaded model: each file holds
        /// (N, …) samples, the input's shape with its leading 1 dropped (the whole shape when it
        /// does not begin with 1). Prints a summary: samples, failures, gas, accuracy, time.
        #[arg(long)]
        batch: bool,
        /// With `--batch`: write one line per sample, `<index> <ok|error code> <gas used>
        /// <outcome hash>`.
        #[arg(long, value_name = "FILE", requires = "batch")]
        hashes: Option<PathBuf>,
        /// With `--batch`: integer .npy of one label per sample; prints the accuracy of the
        /// output's argmax (the first index on ties).
        #[arg(long, value_name = "FILE", requires = "batch")]
        labels: Option<PathBuf>,
        #[command(flatten)]
        schedule: ScheduleArg,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Print the gas of every node, the total and the peak memory, without running (and for
    /// CVM models the deployed runtime's legacy gas).
    Estimate {
        #[command(flatten)]
        model: ModelArgs,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        schedule: ScheduleArg,
    },
    /// Print a model's inputs, parameters, nodes (with shapes, precisions and gas) and outputs.
    Inspect {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        schedule: ScheduleArg,
    },
    /// Convert a CVM model (`symbol` + `params`) to the canonical binary format (validating it
    /// first), or import a float ONNX model (`MODEL.onnx`, with `--calibrate`) as an integer
    /// CVM model: `-o DIR` receives `symbol`, `params`, `model.cvm` and `quantization.json`
    /// (a transformer, which needs the engine's own operators: `model.cvm` and
    /// `quantization.json` only).
    Import {
        #[command(flatten)]
        model: ModelArgs,
        /// Canonical model file to write; for an ONNX model, the directory to write.
        #[arg(short = 'o', long = "output", value_name = "FILE|DIR")]
        output: PathBuf,
        /// ONNX models: .npy of calibration inputs, (N, …) for the model's (1, …): float32, or
        /// integer token ids; for a model of several inputs, once per input as NAME=FILE.
        #[arg(long, value_name = "[NAME=]FILE")]
        calibrate: Vec<cvm_onnx::workflow::SampleFile>,
        /// ONNX models: .npy of inputs to compare the float and integer models on (as
        /// --calibrate).
        #[arg(long, value_name = "[NAME=]FILE")]
        validate: Vec<cvm_onnx::workflow::SampleFile>,
        /// ONNX models: integer .npy of one label per `--validate` sample (N), or per sample
        /// and position for outputs of several rows, such as per-token logits (N, T), for
        /// accuracy.
        #[arg(long, value_name = "FILE")]
        labels: Option<PathBuf>,
        /// ONNX models: one weight scale per layer instead of one per output channel.
        #[arg(long)]
        per_tensor: bool,
        /// ONNX models: how each int8 activation's range is chosen from the calibration set:
        /// the largest |v| seen, or the range of least mean squared error (rounding and
        /// clipping together), which keeps a few outliers from coarsening every other value.
        /// Default: mse for a transformer (a model needing the engine's own operators), max
        /// for the others.
        #[arg(long, value_name = "max|mse")]
        ranges: Option<cvm_onnx::import::Ranges>,
        /// ONNX models: SmoothQuant. Each layer normalization read only by dense layers has
        /// its channels divided by s_j = √(max|x_j| / max|w_j|), the dense layers' weights of
        /// channel j multiplied by it, and the model is calibrated again: outlier channels
        /// move from the int8 activation into the per-channel weights.
        #[arg(long)]
        smooth: bool,
        /// ONNX models: every dimension of an input whose shape the file leaves open beyond
        /// its batch axis (an open batch axis is taken as 1 without it).
        #[arg(long, value_name = "NAME=D0,D1,…")]
        input_shape: Vec<cvm_onnx::import::InputShape>,
        /// ONNX models: the graph output to import (needed when the graph has several).
        #[arg(long, value_name = "NAME")]
        graph_output: Option<String>,
        /// ONNX models: print the report as one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        schedule: ScheduleArg,
    },
    /// Convert a text model to the canonical binary format (validating it first).
    Build {
        /// Text model (.json).
        model: PathBuf,
        /// Canonical model file to write.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
        /// Write the model even if validation rejects it (for building test corpora).
        #[arg(long)]
        allow_invalid: bool,
        #[command(flatten)]
        schedule: ScheduleArg,
    },
    /// Generate tokens with a causal language model: N greedy steps, each a full run of the
    /// model over the last T tokens (T its input's length; a shorter window is padded on the
    /// right with token 0), the next token the argmax of the logits at the last real position.
    /// Prints every step's token, gas, outcome hash and the hash chain of the steps; exit
    /// status 1 when a run fails (the generation stops there).
    Generate {
        #[command(flatten)]
        model: ModelArgs,
        /// The prompt: an integer .npy of token ids, shape (n) or (1, n).
        #[arg(long, value_name = "FILE")]
        ids: PathBuf,
        /// How many tokens to generate.
        #[arg(long, value_name = "N")]
        tokens: usize,
        /// Engine build to run: wasm (consensus configuration) or native.
        #[arg(long, value_enum, default_value_t = EngineArg::Wasm)]
        engine: EngineArg,
        /// The gas limit of each step's run.
        #[arg(long, value_name = "N", default_value_t = cvm_engine::limits::MAX_GAS_PER_RUN)]
        gas_limit: u64,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        schedule: ScheduleArg,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Run a model with a trace: for every node in execution order its index, name, operator,
    /// output shapes, gas charged so far and the digest (BLAKE3) of each output, then the Merkle root
    /// of the node records and the outcome (docs/model-format.md, section 4). Exit status 1 when
    /// the run fails deterministically.
    Trace {
        #[command(flatten)]
        model: ModelArgs,
        /// Input tensor: `FILE` (inputs in declared order) or `NAME=FILE`. Repeatable.
        #[arg(long = "input", value_name = "[NAME=]FILE")]
        inputs: Vec<String>,
        /// Engine build to run: wasm (consensus configuration) or native.
        #[arg(long, value_enum, default_value_t = EngineArg::Wasm)]
        engine: EngineArg,
        /// Keep the output values of the nodes too, in execution order, up to 2^24 values in
        /// all (then `cvm diff` shows the first differing elements).
        #[arg(long)]
        values: bool,
        /// Write the trace file here, for `cvm diff`.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// The run's gas limit.
        #[arg(long, value_name = "N", default_value_t = cvm_engine::limits::MAX_GAS_PER_RUN)]
        gas_limit: u64,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        schedule: ScheduleArg,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Compare two trace files of one model: the first node whose outputs differ while its
    /// operands agree, with its operator, attributes and (when both traces hold values) the first
    /// differing elements. Exit status 0 when equal, 1 when they differ, 2 for an unreadable or
    /// damaged trace.
    Diff {
        /// The first trace file (`cvm trace -o`).
        a: PathBuf,
        /// The second trace file.
        b: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run one node alone from its operand tensors and print its outputs' hashes, to check one
    /// step of a trace by itself. Exit status 1 when the node's kernel fails deterministically
    /// or, with --trace, when its outputs are not the trace's; 2 for a node or operands that do
    /// not fit the model.
    RunNode {
        #[command(flatten)]
        model: ModelArgs,
        /// The node's index in the canonical model (`cvm trace` and `cvm inspect` list them).
        #[arg(long, value_name = "N")]
        node: u32,
        /// One integer .npy per operand of the node that is not a parameter of the model, in the
        /// node's operand order (parameters come from the model).
        #[arg(long = "inputs", value_name = "FILE", num_args = 0.., conflicts_with = "trace")]
        inputs: Vec<PathBuf>,
        /// Take the operands from a trace of this model that keeps values (`cvm trace
        /// --values`), and the model's inputs the node reads from `--input`; then check the
        /// outputs against the trace's record of the node (exit status 1 when they differ).
        #[arg(long, value_name = "TRACE")]
        trace: Option<PathBuf>,
        /// With `--trace`: the model's input tensors, as `cvm run` takes them.
        #[arg(long = "input", value_name = "[NAME=]FILE", requires = "trace")]
        model_inputs: Vec<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        schedule: ScheduleArg,
    },
    /// Run every fixture natively and in wasm, and compare both outcome hashes with the
    /// committed golden hashes. Exit status 1 on any mismatch.
    Audit {
        /// Fixture directory (default: the fixtures of this source tree).
        dir: Option<PathBuf>,
        /// Engines to run.
        #[arg(long, value_enum, default_value_t = AuditEngineArg::Both)]
        engine: AuditEngineArg,
        /// Run every fixture under gas schedule version N (default: each under the schedule it
        /// was blessed under, its "schedule" field, 1 when absent). A fixture blessed under
        /// another schedule has no golden hash for N: it passes when the engines agree.
        #[arg(long, value_name = "N")]
        schedule: Option<u32>,
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Print the crate, format, outcome and ABI versions, the gas schedule versions this
    /// engine defines and the default one, and the engine.wasm hash.
    Version,
}

/// The schedule version the command line uses when given none: the newest the engine defines.
/// The library has no default; the command line says so in `--help` and `cvm version`.
const NEWEST_SCHEDULE: u32 = cvm_engine::gas::Schedule::NEWEST.version;

/// The gas schedule a command validates and prices the model under.
#[derive(Args)]
struct ScheduleArg {
    /// Gas schedule version to validate and price the model under; without it, the newest
    /// schedule the engine defines. An undefined version is the engine's UnsupportedVersion
    /// error (`cvm version` lists the defined ones).
    #[arg(long = "schedule", value_name = "N", default_value_t = NEWEST_SCHEDULE)]
    version: u32,
}

/// Where the model comes from.
#[derive(Args)]
struct ModelArgs {
    /// Model: a canonical binary, a text model (.json), or a directory holding a CVM model's
    /// `symbol` and `params`; for `import`, a CVM model directory or an ONNX model (.onnx).
    #[arg(required_unless_present = "cvm_symbol")]
    model: Option<PathBuf>,
    /// CVM graph JSON (with `--cvm-params`), instead of MODEL.
    #[arg(
        long,
        value_name = "FILE",
        requires = "cvm_params",
        conflicts_with = "model"
    )]
    cvm_symbol: Option<PathBuf>,
    /// CVM params binary (with `--cvm-symbol`).
    #[arg(long, value_name = "FILE", requires = "cvm_symbol")]
    cvm_params: Option<PathBuf>,
}

impl ModelArgs {
    fn source(&self) -> ModelSource {
        match (&self.model, &self.cvm_symbol, &self.cvm_params) {
            (_, Some(symbol), Some(params)) => ModelSource::Cvm {
                symbol: symbol.clone(),
                params: params.clone(),
            },
            (Some(path), _, _) => ModelSource::from_path(path),
            // clap enforces one of the two forms.
            _ => ModelSource::File(PathBuf::new()),
        }
    }
}

/// Where the compiled `engine.wasm` is kept between runs (commands that run wasm).
#[derive(Args)]
struct CacheArgs {
    /// Module cache directory (default: $CVM_CACHE_DIR, else $XDG_CACHE_HOME/cvm, else
    /// $HOME/.cache/cvm).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile engine.wasm in this process; neither read nor write the module cache.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
}

impl CacheArgs {
    /// The wasm engine, through the module cache unless it is off. Cache problems never fail
    /// the command: they are reported on stderr and the module is compiled instead.
    fn engine(&self) -> Result<wasm::WasmEngine, HostError> {
        let dir = match (&self.cache_dir, self.no_cache) {
            (_, true) => None,
            (Some(dir), false) => Some(dir.clone()),
            (None, false) => wasm::default_cache_dir(),
        };
        let Some(dir) = dir else {
            return Ok(wasm::WasmEngine::new()?);
        };
        let engine = wasm::WasmEngine::with_cache(&dir)?;
        for problem in engine.cache_problems() {
            errln!("cvm: warning: module cache: {problem}");
        }
        Ok(engine)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Npy,
    Cvm,
}

#[derive(Clone, Copy, ValueEnum)]
enum EngineArg {
    Wasm,
    Native,
}

#[derive(Clone, Copy, ValueEnum)]
enum AuditEngineArg {
    Both,
    Native,
    Wasm,
}

#[derive(Clone, Copy, ValueEnum)]
enum HashArg {
    #[value(name = "sha3-256")]
    Sha3_256,
    #[value(name = "keccak256")]
    Keccak256,
}

/// How a command ended, beyond success.
enum Failure {
    /// The model or input is rejected deterministically (exit 1); already reported.
    Deterministic,
    /// Usage or node-local error (exit 2).
    Host(HostError),
}

impl From<HostError> for Failure {
    fn from(error: HostError) -> Failure {
        Failure::Host(error)
    }
}

impl From<cvm_formats::ReadError> for Failure {
    fn from(error: cvm_formats::ReadError) -> Failure {
        Failure::Host(error.into())
    }
}

fn main() -> ExitCode {
    let started = Instant::now();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            model,
            inputs,
            input_format,
            output_format,
            big_endian,
            engine,
            gas_limit,
            hash,
            json,
            output,
            quantization,
            dequantize,
            timings,
            batch,
            hashes,
            labels,
            schedule,
            cache,
        } => {
            if dequantize && output_format == Format::Cvm {
                errln!(
                    "cvm: error: --dequantize writes float32 .npy; it does not apply to \
                     --output-format cvm"
                );
                return ExitCode::from(2);
            }
            let quantization = match read_quantization(&model, quantization.as_deref(), dequantize)
            {
                Ok(quantization) => quantization,
                Err(error) => {
                    errln!("cvm: error: {error}");
                    return ExitCode::from(2);
                }
            };
            let engine = match engine {
                EngineArg::Wasm => EngineKind::Wasm,
                EngineArg::Native => EngineKind::Native,
            };
            let hash = match hash {
                HashArg::Sha3_256 => HashAlgorithm::Sha3_256,
                HashArg::Keccak256 => HashAlgorithm::Keccak256,
            };
            let options = RunOptions {
                engine,
                gas_limit,
                hash,
                json,
                input_format,
                output_format,
                big_endian,
                timings,
                schedule: schedule.version,
                quantization,
                dequantize,
            };
            let mut recorded = Timings::default();
            let result = if batch {
                let files = BatchFiles {
                    output: output.as_deref(),
                    hashes: hashes.as_deref(),
                    labels: labels.as_deref(),
                };
                run_batch(
                    &model.source(),
                    &inputs,
                    &options,
                    &files,
                    &cache,
                    &mut recorded,
                    started,
                )
            } else {
                run(
                    &model.source(),
                    &inputs,
                    &options,
                    &cache,
                    output.as_deref(),
                    &mut recorded,
                )
            };
            if timings {
                err!("{}", recorded.render());
            }
            result
        }
        Command::Estimate {
            model,
            json,
            schedule,
        } => estimate(&model.source(), json, schedule.version),
        Command::Inspect { model, schedule } => inspect(&model.source(), schedule.version),
        Command::Import {
            model,
            output,
            calibrate,
            validate,
            labels,
            per_tensor,
            ranges,
            smooth,
            input_shape,
            graph_output,
            json,
            schedule,
        } => match &model.model {
            Some(path) if is_onnx(path) && !calibrate.is_empty() => import_onnx(&OnnxImport {
                model: path,
                output: &output,
                calibrate: &calibrate,
                validate: &validate,
                labels: labels.as_deref(),
                per_tensor,
                ranges,
                smooth,
                input_shapes: &input_shape,
                graph_output: graph_output.as_deref(),
                json,
                schedule: schedule.version,
            }),
            Some(path) if is_onnx(path) => Err(HostError::Usage(
                "importing an ONNX model needs --calibrate <inputs.npy>: float32 inputs (or \
                 token ids) whose ranges set the integer model's scales"
                    .into(),
            )
            .into()),
            _ if !calibrate.is_empty()
                || !validate.is_empty()
                || labels.is_some()
                || per_tensor
                || ranges.is_some()
                || smooth
                || json
                || graph_output.is_some()
                || !input_shape.is_empty() =>
            {
                Err(HostError::Usage(
                    "--calibrate, --validate, --labels, --per-tensor, --ranges, --smooth, \
                     --input-shape, --graph-output and --json are for ONNX models (MODEL.onnx)"
                        .into(),
                )
                .into())
            }
            _ => import(&model.source(), &output, schedule.version),
        },
        Command::Build {
            model,
            output,
            allow_invalid,
            schedule,
        } => build(&model, &output, allow_invalid, schedule.version),
        Command::Generate {
            model,
            ids,
            tokens,
            engine,
            gas_limit,
            json,
            schedule,
            cache,
        } => generate(
            &model.source(),
            &ids,
            &GenerateOptions {
                engine: match engine {
                    EngineArg::Wasm => EngineKind::Wasm,
                    EngineArg::Native => EngineKind::Native,
                },
                tokens,
                gas_limit,
                schedule: schedule.version,
                json,
            },
            &cache,
        ),
        Command::Trace {
            model,
            inputs,
            engine,
            values,
            output,
            gas_limit,
            json,
            schedule,
            cache,
        } => trace(
            &model.source(),
            &inputs,
            &TraceRunOptions {
                engine: match engine {
                    EngineArg::Wasm => EngineKind::Wasm,
                    EngineArg::Native => EngineKind::Native,
                },
                gas_limit,
                schedule: schedule.version,
                values,
                output: output.as_deref(),
                json,
            },
            &cache,
        ),
        Command::Diff { a, b, json } => diff_traces(&a, &b, json),
        Command::RunNode {
            model,
            node,
            inputs,
            trace,
            model_inputs,
            json,
            schedule,
        } => {
            let operands = match &trace {
                Some(path) => Operands::Trace {
                    path,
                    model_inputs: &model_inputs,
                },
                None => Operands::Files(&inputs),
            };
            run_node(&model.source(), node, &operands, schedule.version, json)
        }
        Command::Audit {
            dir,
            engine,
            schedule,
            json,
            cache,
        } => audit(dir.as_deref(), engine, schedule, json, &cache),
        Command::Version => version(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Deterministic) => ExitCode::from(1),
        Err(Failure::Host(error)) => {
            errln!("cvm: error: {error}");
            ExitCode::from(2)
        }
    }
}

/// The quantization `cvm run` uses: `--quantization FILE`, else the `quantization.json` of a
/// model directory, else none (which `--dequantize` needs).
fn read_quantization(
    model: &ModelArgs,
    path: Option<&Path>,
    dequantize: bool,
) -> Result<Option<Quantization>, HostError> {
    let found = match (path, &model.model) {
        (Some(path), _) => Some(path.to_path_buf()),
        (None, Some(dir)) if dir.is_dir() && dir.join("quantization.json").is_file() => {
            Some(dir.join("quantization.json"))
        }
        _ => None,
    };
    let Some(path) = found else {
        if dequantize {
            return Err(HostError::Usage(
                "--dequantize needs the model's quantization: --quantization FILE, or a model \
                 directory written by `cvm import` from ONNX"
                    .into(),
            ));
        }
        return Ok(None);
    };
    Ok(Some(cvm_onnx::workflow::read_quantization(&path)?))
}

fn version() -> Result<(), Failure> {
    let defined: Vec<String> = cvm_engine::gas::Schedule::ALL
        .iter()
        .map(|schedule| schedule.version.to_string())
        .collect();
    let pin = if wasm::engine_wasm_matches_pin() {
        "the pinned module"
    } else {
        "NOT the module host/runtime/engine.wasm.sha3 pins"
    };
    outln!(
        "cvm {}\n\
         model format version   {}\n\
         outcome version        {}\n\
         gas schedule versions  {} (default {NEWEST_SCHEDULE}, the newest)\n\
         engine ABI version     {}\n\
         engine.wasm sha3-256   {} ({} bytes, {pin})",
        env!("CARGO_PKG_VERSION"),
        cvm_engine::FORMAT_VERSION,
        cvm_engine::outcome::OUTCOME_VERSION,
        defined.join(", "),
        wasm::ABI_VERSION,
        wasm::engine_wasm_sha3(),
        wasm::ENGINE_WASM.len()
    )
}
