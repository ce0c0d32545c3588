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
use cvm_cli::inputs::{InputArg, assign, read_input};
use cvm_cli::render;
use cvm_cli::runner::{
    EngineKind, LoadedModel, ModelSource, Timings, execute_timed, load_model, phase,
    validate_natively,
};
use cvm_engine::Report;
use cvm_engine::outcome::Status;
use cvm_formats::cvm::{self, CvmMeta};
use cvm_formats::npy;
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
        /// CVM output bytes.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Print the duration of each phase (reading, compiling or loading the engine, model
        /// load, run, hashing, …) to stderr, in milliseconds; stdout is unchanged.
        #[arg(long)]
        timings: bool,
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
    /// first).
    Import {
        #[command(flatten)]
        model: ModelArgs,
        /// Canonical model file to write.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
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
    /// `symbol` and `params`.
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
            timings,
            schedule,
            cache,
        } => {
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
            };
            let mut recorded = Timings::default();
            let result = run(
                &model.source(),
                &inputs,
                &options,
                &cache,
                output.as_deref(),
                &mut recorded,
            );
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
            schedule,
        } => import(&model.source(), &output, schedule.version),
        Command::Build {
            model,
            output,
            allow_invalid,
            schedule,
        } => build(&model, &output, allow_invalid, schedule.version),
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

fn print_report(report: &Report, hash: HashAlgorithm, json: bool) -> Result<(), Failure> {
    if json {
        let mut stdout = std::io::stdout().lock();
        render::write_report_json(&mut stdout, report, hash, None)
            .and_then(|()| stdout.flush())
            .map_err(|source| Failure::Host(HostError::Output(source)))
    } else {
        out!("{}", render::report_text(report, hash))
    }
}

/// How `cvm run` executes and reports.
struct RunOptions {
    engine: EngineKind,
    gas_limit: u64,
    hash: HashAlgorithm,
    json: bool,
    input_format: Format,
    output_format: Format,
    big_endian: bool,
    /// `--timings`: also time the hashing (which rendering repeats).
    timings: bool,
    /// `--schedule`: the gas schedule version both engines validate under.
    schedule: u32,
}

fn run(
    source: &ModelSource,
    input_args: &[String],
    options: &RunOptions,
    cache: &CacheArgs,
    output: Option<&Path>,
    timings: &mut Timings,
) -> Result<(), Failure> {
    let LoadedModel {
        bytes,
        model,
        cvm: meta,
        rejected,
    } = timings.time(phase::READ_MODEL, || load_model(source))?;
    if let Some(report) = rejected {
        print_report(&report, options.hash, options.json)?;
        return Err(Failure::Deterministic);
    }
    if meta.is_none()
        && (options.input_format == Format::Cvm || options.output_format == Format::Cvm)
    {
        return Err(HostError::Usage(
            "--input-format cvm and --output-format cvm need a CVM model (symbol + params)".into(),
        )
        .into());
    }
    let started = Instant::now();
    let inputs = match (&meta, options.input_format) {
        (Some(meta), Format::Cvm) => match cvm_input(meta, input_args, options.big_endian)? {
            Ok(input) => vec![input],
            Err(error) => {
                print_report(&Report::failure(error, 0), options.hash, options.json)?;
                return Err(Failure::Deterministic);
            }
        },
        // A model that does not decode is run anyway: the engine rejects it deterministically.
        _ => match &model {
            Some(model) => {
                let arguments: Vec<InputArg> =
                    input_args.iter().map(|a| InputArg::parse(a)).collect();
                let declared: Vec<(String, Vec<u32>)> = model
                    .inputs
                    .iter()
                    .map(|i| (i.name.clone(), i.shape.clone()))
                    .collect();
                assign(&declared, &arguments)?
                    .iter()
                    .map(|path| read_input(path))
                    .collect::<Result<Vec<_>, _>>()?
            }
            None => Vec::new(),
        },
    };
    timings.record(phase::READ_INPUTS, started.elapsed());
    let wasm = match options.engine {
        EngineKind::Wasm => {
            let started = Instant::now();
            let engine = cache.engine()?;
            let name = match engine.origin() {
                wasm::ModuleOrigin::Compiled => phase::ENGINE_COMPILE,
                wasm::ModuleOrigin::Cached => phase::ENGINE_CACHE_LOAD,
            };
            timings.record(name, started.elapsed());
            Some(engine)
        }
        EngineKind::Native => None,
    };
    let report = execute_timed(
        options.engine,
        wasm.as_ref(),
        bytes,
        inputs,
        options.gas_limit,
        options.schedule,
        timings,
    )?;
    if options.timings {
        timings.time(phase::HASHING, || outcome_hash(&report, options.hash));
    }
    let Status::Ok { outputs } = &report.outcome.status else {
        print_report(&report, options.hash, options.json)?;
        return Err(Failure::Deterministic);
    };
    let cvm_bytes = meta
        .as_ref()
        .map(|meta| cvm::encode_output(meta.postprocess, outputs, options.big_endian));
    if options.json {
        let cvm = cvm_bytes.as_ref().map(|bytes| match bytes {
            Ok(bytes) => render::CvmOutput::Bytes(bytes),
            Err(error) => render::CvmOutput::Error(&error.message),
        });
        let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
        render::write_report_json(&mut stdout, &report, options.hash, cvm)
            .and_then(|()| stdout.flush())
            .map_err(|source| Failure::Host(HostError::Output(source)))?;
    } else {
        out!("{}", render::report_text(&report, options.hash))?;
        match &cvm_bytes {
            Some(Ok(bytes)) => outln!(
                "cvm out:  {} bytes {}",
                bytes.len(),
                render::hex_preview(bytes, 64)
            )?,
            Some(Err(error)) => outln!("cvm out:  {}", error.message)?,
            None => {}
        }
    }
    if let Some(path) = output {
        match (options.output_format, cvm_bytes) {
            (Format::Cvm, Some(Ok(bytes))) => {
                std::fs::write(path, bytes).map_err(|source| HostError::io(path, source))?
            }
            (Format::Cvm, Some(Err(error))) => return Err(HostError::input(error.message).into()),
            _ => write_outputs(path, outputs)?,
        }
    }
    Ok(())
}

/// The single raw CVM input file of `--input-format cvm`.
fn cvm_input(
    meta: &CvmMeta,
    input_args: &[String],
    big_endian: bool,
) -> Result<Result<cvm_engine::exec::InputTensor, cvm_engine::Error>, HostError> {
    let [argument] = input_args else {
        return Err(HostError::Usage(format!(
            "--input-format cvm takes exactly one --input file of raw bytes for \"{}\", got {}",
            cvm::DATA,
            input_args.len()
        )));
    };
    let argument = InputArg::parse(argument);
    if argument
        .name
        .as_deref()
        .is_some_and(|name| name != cvm::DATA)
    {
        return Err(HostError::Usage(format!(
            "a CVM model has one input, \"{}\"",
            cvm::DATA
        )));
    }
    let bytes = read_file(&argument.path, FileLimit::TENSOR)?;
    // The deployed `CVMAPIInference` checks the input length, runs, then lays out the output:
    // each failure is a deterministic error of the run.
    Ok(
        cvm::decode_input(meta, &bytes, big_endian).and_then(|input| {
            cvm::check_output_contract(meta.postprocess, &meta.output_shapes).map(|()| input)
        }),
    )
}

fn write_outputs(
    path: &Path,
    outputs: &[cvm_engine::outcome::OutputTensor],
) -> Result<(), HostError> {
    for (index, tensor) in outputs.iter().enumerate() {
        let target = if outputs.len() == 1 {
            path.to_path_buf()
        } else {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            path.with_file_name(format!("{stem}_{index}.npy"))
        };
        // Streamed: the file is written in blocks, never held whole in memory.
        let written = std::fs::File::create(&target).and_then(|file| {
            let mut file = std::io::BufWriter::new(file);
            npy::write_npy_to(&mut file, &tensor.shape, &tensor.data)?;
            file.flush()
        });
        written.map_err(|source| HostError::io(&target, source))?;
    }
    Ok(())
}

/// Loads and validates natively under gas schedule `schedule`; a rejection is printed (as JSON
/// when asked) and is a deterministic failure.
fn validated(
    source: &ModelSource,
    json: bool,
    schedule: u32,
) -> Result<(cvm_engine::ValidatedModel, LoadedModel), Failure> {
    let mut loaded = load_model(source)?;
    if let Some(report) = loaded.rejected.take() {
        print_report(&report, HashAlgorithm::default(), json)?;
        return Err(Failure::Deterministic);
    }
    match validate_natively(&loaded.bytes, schedule) {
        Ok(model) => Ok((model, loaded)),
        Err(report) => {
            print_report(&report, HashAlgorithm::default(), json)?;
            Err(Failure::Deterministic)
        }
    }
}

fn estimate(source: &ModelSource, json: bool, schedule: u32) -> Result<(), Failure> {
    let (model, loaded) = validated(source, json, schedule)?;
    let estimate = model.estimate();
    if json {
        let mut value = render::estimate_json(&estimate);
        if let Some(meta) = &loaded.cvm {
            value["legacy_gas"] = match &meta.legacy_gas {
                Ok(gas) => (*gas).into(),
                Err(error) => error.message.clone().into(),
            };
            value["cvm"] = render::cvm_contract_json(&meta.contract);
        }
        outln!("{value}")?;
    } else {
        out!("{}", render::estimate_text(&estimate))?;
        if let Some(meta) = &loaded.cvm {
            match &meta.legacy_gas {
                Ok(gas) => outln!("legacy gas:  {gas} (the deployed CVM runtime's figure)")?,
                Err(error) => outln!("legacy gas:  none ({})", error.message)?,
            }
            out!("{}", render::cvm_contract_text(&meta.contract))?;
        }
    }
    Ok(())
}

fn import(source: &ModelSource, output: &Path, schedule: u32) -> Result<(), Failure> {
    if !matches!(source, ModelSource::Cvm { .. }) {
        return Err(HostError::Usage("import reads a CVM model: a directory with symbol and params, or --cvm-symbol with --cvm-params".into()).into());
    }
    let (_, loaded) = validated(source, false, schedule)?;
    std::fs::write(output, &loaded.bytes).map_err(|source| HostError::io(output, source))?;
    outln!("wrote {} ({} bytes)", output.display(), loaded.bytes.len())?;
    Ok(())
}

fn inspect(source: &ModelSource, schedule: u32) -> Result<(), Failure> {
    let (model, loaded) = validated(source, false, schedule)?;
    if let Some(meta) = &loaded.cvm {
        outln!(
            "CVM model {}, post-processing \"{}\", legacy gas {}",
            meta.version.name(),
            meta.postprocess_name,
            match &meta.legacy_gas {
                Ok(gas) => gas.to_string(),
                Err(error) => format!("none ({})", error.message),
            }
        )?;
        out!("{}", render::cvm_contract_text(&meta.contract))?;
    }
    let name_of = |id: usize| -> String {
        if id < model.inputs.len() {
            return model.inputs[id].name.clone();
        }
        if model.is_param(id) {
            return model.params[id - model.inputs.len()].0.clone();
        }
        for node in &model.nodes {
            if (node.first_output..node.first_output + node.output_types.len()).contains(&id) {
                let output = id - node.first_output;
                return if output == 0 {
                    node.name.clone()
                } else {
                    format!("{}:{output}", node.name)
                };
            }
        }
        format!("#{id}")
    };
    let mut out = String::from("inputs:\n");
    for input in &model.inputs {
        out.push_str(&format!(
            "  {}  shape {}  precision {}\n",
            input.name, input.ty.shape, input.ty.precision
        ));
    }
    out.push_str("params:\n");
    for (name, tensor) in &model.params {
        out.push_str(&format!(
            "  {name}  shape {}  precision {}\n",
            tensor.shape, tensor.precision
        ));
    }
    out.push_str("nodes:\n");
    for (index, node) in model.nodes.iter().enumerate() {
        let operands: Vec<String> = node.inputs.iter().map(|&id| name_of(id)).collect();
        let results: Vec<String> = node
            .output_types
            .iter()
            .map(|ty| format!("{} p{}", ty.shape, ty.precision))
            .collect();
        out.push_str(&format!(
            "  #{index} {} = {}({}) -> {}  gas {}\n",
            node.name,
            node.op.name,
            operands.join(", "),
            results.join(", "),
            node.gas
        ));
    }
    out.push_str("outputs:\n");
    for (name, id) in &model.outputs {
        let ty = &model.value_types[*id];
        out.push_str(&format!(
            "  {name} = {}  shape {}  precision {}\n",
            name_of(*id),
            ty.shape,
            ty.precision
        ));
    }
    out.push_str(&format!(
        "total gas {} (schedule v{})  peak memory {} bytes  arena {} bytes\n",
        model.total_gas, model.schedule.version, model.peak_memory_bytes, model.arena_bytes
    ));
    out!("{out}")?;
    Ok(())
}

fn build(
    model_path: &Path,
    output: &Path,
    allow_invalid: bool,
    schedule: u32,
) -> Result<(), Failure> {
    // Read as text explicitly: `build` converts text models only.
    let bytes = read_file(model_path, FileLimit::MODEL)?;
    let text = String::from_utf8(bytes).map_err(|_| cvm_formats::ReadError::TextModel {
        path: model_path.display().to_string(),
        message: "not UTF-8 text".into(),
    })?;
    let model = cvm_formats::text::parse_text_model(
        &text,
        &cvm_formats::text::base_dir_of(model_path),
        &model_path.display().to_string(),
    )?;
    let encoded = model.encode();
    if !allow_invalid && let Err(report) = validate_natively(&encoded, schedule) {
        print_report(&report, HashAlgorithm::default(), false)?;
        return Err(Failure::Deterministic);
    }
    std::fs::write(output, &encoded).map_err(|source| HostError::io(output, source))?;
    outln!("wrote {} ({} bytes)", output.display(), encoded.len())?;
    Ok(())
}

fn audit(
    dir: Option<&Path>,
    engine: AuditEngineArg,
    schedule: Option<u32>,
    json: bool,
    cache: &CacheArgs,
) -> Result<(), Failure> {
    use cvm_cli::audit::{Engines, audit_case};
    use std::io::IsTerminal;

    // Every case would fail to load alike; say so once instead.
    if let Some(version) = schedule
        && let Err(error) = cvm_engine::schedule_by_version(version)
    {
        return Err(HostError::Usage(error.to_string()).into());
    }

    let root = dir.map_or_else(cvm_fixtures::root, Path::to_path_buf);
    let cases = cvm_fixtures::cases_in(&root).map_err(|e| HostError::input(e.to_string()))?;
    if cases.is_empty() {
        return Err(HostError::Usage(format!("no fixture cases under {}", root.display())).into());
    }
    let engines = match engine {
        AuditEngineArg::Both => Engines::Both,
        AuditEngineArg::Native => Engines::Native,
        AuditEngineArg::Wasm => Engines::Wasm,
    };
    let wasm = match engines {
        Engines::Native => None,
        _ => Some(cache.engine()?),
    };
    let progress = std::io::stderr().is_terminal() && !json;
    let started = std::time::Instant::now();
    let mut rows = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        if progress {
            err!("\r\x1b[2K[{}/{}] {}", index + 1, cases.len(), case.name);
        }
        rows.push(audit_case(case, engines, wasm.as_ref(), schedule));
    }
    if progress {
        err!("\r\x1b[2K");
    }
    let failed = rows.iter().filter(|row| !row.passed()).count();
    let summary = format!(
        "audit: {} fixtures, {} pass, {failed} fail ({} {}{}; {:.1?})",
        rows.len(),
        rows.len() - failed,
        std::env::consts::ARCH,
        match engines {
            Engines::Both => "native and wasm",
            Engines::Native => "native",
            Engines::Wasm => "wasm",
        },
        schedule.map_or(String::new(), |version| format!(
            "; every fixture under gas schedule {version}"
        )),
        started.elapsed()
    );
    if json {
        let value = serde_json::json!({
            "fixtures": rows.iter().map(|row| row.to_json()).collect::<Vec<_>>(),
            "summary": {"total": rows.len(), "passed": rows.len() - failed, "failed": failed, "arch": std::env::consts::ARCH, "schedule": schedule},
        });
        outln!("{value}")?;
    } else {
        let width = rows
            .iter()
            .map(|row| row.name.len())
            .max()
            .unwrap_or(7)
            .max(7);
        let short = |result: &Option<Result<String, String>>| match result {
            None => String::from("-"),
            Some(Ok(hash)) => hash.chars().take(12).collect(),
            Some(Err(_)) => String::from("FAILED"),
        };
        outln!(
            "{:<width$}  {:<12}  {:<12}  {:<12}  {:>12}  {:>9}",
            "fixture",
            "native",
            "wasm",
            "golden",
            "gas",
            "time"
        )?;
        for row in &rows {
            outln!(
                "{:<width$}  {:<12}  {:<12}  {:<12}  {:>12}  {:>9.1?}{}",
                row.name,
                short(&row.native),
                short(&row.wasm),
                match (&row.golden, row.golden_applies()) {
                    (_, false) => format!("(blessed v{})", row.blessed_schedule),
                    (None, true) => String::from("(none)"),
                    (Some(golden), true) => golden.chars().take(12).collect(),
                },
                row.gas_used.map_or(String::from("-"), |g| g.to_string()),
                row.time,
                if row.passed() { "" } else { "  MISMATCH" }
            )?;
            for (engine, result) in [("native", &row.native), ("wasm", &row.wasm)] {
                if let Some(Err(message)) = result {
                    outln!("    {engine}: {message}")?;
                }
            }
        }
        outln!("{summary}")?;
    }
    if failed > 0 {
        Err(Failure::Deterministic)
    } else {
        Ok(())
    }
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
