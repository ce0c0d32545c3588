//! The `cvm` command-line tool: run, estimate, inspect and build models.
//!
//! Exit status (a contract scripts rely on): 0 success; 1 a deterministic error of the model or
//! its inputs (the outcome is still printed and hashed); 2 a usage error or a node-local failure
//! (unreadable file, bad text model, wasm runtime failure), which is never hashed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use cvm_engine::Report;
use cvm_engine::outcome::Status;
use cvm_host::error::{HostError, read_file};
use cvm_host::hash::{HashAlgorithm, hex};
use cvm_host::inputs::{InputArg, assign, read_input};
use cvm_host::runner::{EngineKind, LoadedModel, execute, load_model_file, validate_natively};
use cvm_host::{npy, render, wasm};

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
        /// Model: canonical binary (.cvm) or text model (.json).
        model: PathBuf,
        /// Input tensor as .npy: `FILE` (inputs in declared order) or `NAME=FILE`. Repeatable.
        #[arg(long = "input", value_name = "[NAME=]FILE")]
        inputs: Vec<String>,
        /// Engine build to run: wasm (consensus configuration) or native.
        #[arg(long, value_enum, default_value_t = EngineArg::Wasm)]
        engine: EngineArg,
        /// Stop with OutOfGas when the next node would take gas used past this limit.
        #[arg(long, value_name = "N", default_value_t = u64::MAX, hide_default_value = true)]
        gas_limit: u64,
        /// Hash function over the outcome bytes.
        #[arg(long, value_enum, default_value_t = HashArg::Sha3_256)]
        hash: HashArg,
        /// Print exactly one JSON object instead of the summary.
        #[arg(long)]
        json: bool,
        /// Write the outputs as int32 .npy: FILE for a single output; with several outputs,
        /// FILE's stem followed by `_<index>.npy` for each.
        #[arg(long, value_name = "FILE.npy")]
        output: Option<PathBuf>,
    },
    /// Print the gas of every node, the total and the peak memory, without running.
    Estimate {
        /// Model: canonical binary or text model.
        model: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print a model's inputs, parameters, nodes (with shapes and precisions) and outputs.
    Inspect {
        /// Model: canonical binary or text model.
        model: PathBuf,
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
    },
    /// Print the crate, format, schedule and ABI versions and the engine.wasm hash.
    Version,
}

#[derive(Clone, Copy, ValueEnum)]
enum EngineArg {
    Wasm,
    Native,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            model,
            inputs,
            engine,
            gas_limit,
            hash,
            json,
            output,
        } => {
            let engine = match engine {
                EngineArg::Wasm => EngineKind::Wasm,
                EngineArg::Native => EngineKind::Native,
            };
            let hash = match hash {
                HashArg::Sha3_256 => HashAlgorithm::Sha3_256,
                HashArg::Keccak256 => HashAlgorithm::Keccak256,
            };
            run(
                &model,
                &inputs,
                engine,
                gas_limit,
                hash,
                json,
                output.as_deref(),
            )
        }
        Command::Estimate { model, json } => estimate(&model, json),
        Command::Inspect { model } => inspect(&model),
        Command::Build {
            model,
            output,
            allow_invalid,
        } => build(&model, &output, allow_invalid),
        Command::Version => {
            version();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Deterministic) => ExitCode::from(1),
        Err(Failure::Host(error)) => {
            eprintln!("cvm: error: {error}");
            ExitCode::from(2)
        }
    }
}

fn print_report(report: &Report, hash: HashAlgorithm, json: bool) {
    if json {
        println!("{}", render::report_json(report, hash));
    } else {
        print!("{}", render::report_text(report, hash));
    }
}

fn run(
    model_path: &Path,
    input_args: &[String],
    engine: EngineKind,
    gas_limit: u64,
    hash: HashAlgorithm,
    json: bool,
    output: Option<&Path>,
) -> Result<(), Failure> {
    let LoadedModel { bytes, model } = load_model_file(model_path)?;
    let arguments: Vec<InputArg> = input_args.iter().map(|a| InputArg::parse(a)).collect();
    // A model that does not decode is run anyway: the engine rejects it deterministically.
    let declared: Vec<(String, Vec<u32>)> = model
        .as_ref()
        .map(|m| {
            m.inputs
                .iter()
                .map(|i| (i.name.clone(), i.shape.clone()))
                .collect()
        })
        .unwrap_or_default();
    let inputs = if model.is_some() {
        assign(&declared, &arguments)?
            .iter()
            .map(|path| read_input(path))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let report = execute(engine, None, &bytes, &inputs, gas_limit)?;
    print_report(&report, hash, json);
    match &report.outcome.status {
        Status::Ok { outputs } => {
            if let Some(path) = output {
                write_outputs(path, outputs)?;
            }
            Ok(())
        }
        Status::Error { .. } => Err(Failure::Deterministic),
    }
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
        let bytes = npy::write_npy(&npy::NpyArray {
            shape: tensor.shape.clone(),
            data: tensor.data.clone(),
        });
        std::fs::write(&target, bytes).map_err(|source| HostError::io(&target, source))?;
    }
    Ok(())
}

/// Validates natively; a rejection is printed (as JSON when asked) and is a deterministic failure.
fn validated(model_path: &Path, json: bool) -> Result<cvm_engine::ValidatedModel, Failure> {
    let LoadedModel { bytes, .. } = load_model_file(model_path)?;
    validate_natively(&bytes).map_err(|report| {
        print_report(&report, HashAlgorithm::default(), json);
        Failure::Deterministic
    })
}

fn estimate(model_path: &Path, json: bool) -> Result<(), Failure> {
    let model = validated(model_path, json)?;
    let estimate = model.estimate();
    if json {
        println!("{}", render::estimate_json(&estimate));
    } else {
        print!("{}", render::estimate_text(&estimate));
    }
    Ok(())
}

fn inspect(model_path: &Path) -> Result<(), Failure> {
    let model = validated(model_path, false)?;
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
        "total gas {}  peak memory {} bytes\n",
        model.total_gas, model.peak_memory_bytes
    ));
    print!("{out}");
    Ok(())
}

fn build(model_path: &Path, output: &Path, allow_invalid: bool) -> Result<(), Failure> {
    // Read as text explicitly: `build` converts text models only.
    let bytes = read_file(model_path)?;
    let text = String::from_utf8(bytes).map_err(|_| HostError::TextModel {
        path: model_path.display().to_string(),
        message: "not UTF-8 text".into(),
    })?;
    let model = cvm_host::text::parse_text_model(
        &text,
        &cvm_host::text::base_dir_of(model_path),
        &model_path.display().to_string(),
    )?;
    let encoded = model.encode();
    if !allow_invalid && let Err(report) = validate_natively(&encoded) {
        print_report(&report, HashAlgorithm::default(), false);
        return Err(Failure::Deterministic);
    }
    std::fs::write(output, &encoded).map_err(|source| HostError::io(output, source))?;
    println!("wrote {} ({} bytes)", output.display(), encoded.len());
    Ok(())
}

fn version() {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "cvm {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(
        stdout,
        "model format version   {}",
        cvm_engine::FORMAT_VERSION
    );
    let _ = writeln!(
        stdout,
        "outcome version        {}",
        cvm_engine::outcome::OUTCOME_VERSION
    );
    let _ = writeln!(
        stdout,
        "gas schedule version   {}",
        cvm_engine::gas::Schedule::CURRENT.version
    );
    let _ = writeln!(stdout, "engine ABI version     {}", wasm::ABI_VERSION);
    let _ = writeln!(
        stdout,
        "engine.wasm sha3-256   {} ({} bytes)",
        hex(&HashAlgorithm::Sha3_256.digest(wasm::ENGINE_WASM)),
        wasm::ENGINE_WASM.len()
    );
}
