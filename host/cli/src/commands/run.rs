//! `cvm run`: reading the inputs, executing, and reporting the outcome and the outputs.

use crate::*;

pub(crate) fn print_report(
    report: &Report,
    hash: HashAlgorithm,
    json: bool,
) -> Result<(), Failure> {
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
pub(crate) struct RunOptions {
    pub(crate) engine: EngineKind,
    pub(crate) gas_limit: u64,
    pub(crate) hash: HashAlgorithm,
    pub(crate) json: bool,
    pub(crate) input_format: Format,
    pub(crate) output_format: Format,
    pub(crate) big_endian: bool,
    /// `--timings`: also time the hashing (which rendering repeats).
    pub(crate) timings: bool,
    /// `--schedule`: the gas schedule version both engines validate under.
    pub(crate) schedule: u32,
    /// The float edges of an imported model (`--quantization`, or the model directory's
    /// `quantization.json`).
    pub(crate) quantization: Option<Quantization>,
    /// `--dequantize`: write the outputs as float32, through the quantization.
    pub(crate) dequantize: bool,
}

pub(crate) fn run(
    source: &ModelSource,
    input_args: &[String],
    options: &RunOptions,
    cache: &CacheArgs,
    output: Option<&Path>,
    timings: &mut Timings,
) -> Result<(), Failure> {
    check_output_arguments(options, output)?;
    let LoadedModel {
        bytes,
        model,
        cvm: meta,
        ..
    } = accepted(
        timings.time(phase::READ_MODEL, || load_model(source))?,
        options.hash,
        options.json,
    )?;
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
            Some(model) => read_inputs(model, input_args, options.quantization.as_ref())?,
            None => Vec::new(),
        },
    };
    timings.record(phase::READ_INPUTS, started.elapsed());
    let wasm = wasm_engine(options.engine, cache, timings)?;
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
            _ => match (&options.quantization, options.dequantize) {
                (Some(quantization), true) => write_dequantized(path, outputs, quantization)?,
                _ => write_outputs(path, outputs)?,
            },
        }
    }
    Ok(())
}

/// The compiled wasm engine when `engine` is wasm (through the module cache unless it is off),
/// timed as `engine compile` or `engine cache load`; `None` natively.
pub(crate) fn wasm_engine(
    engine: EngineKind,
    cache: &CacheArgs,
    timings: &mut Timings,
) -> Result<Option<wasm::WasmEngine>, HostError> {
    match engine {
        EngineKind::Wasm => {
            let started = Instant::now();
            let engine = cache.engine()?;
            let name = match engine.origin() {
                wasm::ModuleOrigin::Compiled => phase::ENGINE_COMPILE,
                wasm::ModuleOrigin::Cached => phase::ENGINE_CACHE_LOAD,
            };
            timings.record(name, started.elapsed());
            Ok(Some(engine))
        }
        EngineKind::Native => Ok(None),
    }
}

/// Refuses output arguments that would write nothing or somewhere else than asked, before any
/// work is done.
pub(crate) fn check_output_arguments(
    options: &RunOptions,
    output: Option<&Path>,
) -> Result<(), HostError> {
    match output {
        None if options.output_format == Format::Cvm => Err(HostError::Usage(
            "--output-format cvm says how --output is written; give --output FILE".into(),
        )),
        Some(path)
            if path.is_dir()
                || path
                    .as_os_str()
                    .to_string_lossy()
                    .ends_with(std::path::MAIN_SEPARATOR) =>
        {
            Err(HostError::Usage(format!(
                "--output {}: is a directory; --output names a file (with several outputs, \
                 the file's stem followed by _<index>.npy for each)",
                path.display()
            )))
        }
        _ => Ok(()),
    }
}

/// A model as `load_model` loaded it, unless the CVM load checks rejected it: then the
/// rejection is printed (hashed with `hash`, as JSON when asked) and is a deterministic failure.
///
/// # Errors
/// [`Failure::Deterministic`] for a rejected model; a failure to print.
pub(crate) fn accepted(
    mut loaded: LoadedModel,
    hash: HashAlgorithm,
    json: bool,
) -> Result<LoadedModel, Failure> {
    if let Some(report) = loaded.rejected.take() {
        print_report(&report, hash, json)?;
        return Err(Failure::Deterministic);
    }
    Ok(loaded)
}

/// The `--input` files of `model` (`.npy`, in declared order or `NAME=FILE`), a float32 file
/// quantized through `quantization`, each checked against what the quantization says the
/// input holds ([`check_holds`]).
///
/// # Errors
/// As [`assign`], [`read_input_quantized`] and [`check_holds`].
pub(crate) fn read_inputs(
    model: &cvm_engine::Model,
    input_args: &[String],
    quantization: Option<&Quantization>,
) -> Result<Vec<cvm_engine::exec::InputTensor>, HostError> {
    let arguments: Vec<InputArg> = input_args.iter().map(|a| InputArg::parse(a)).collect();
    let mut tensors = Vec::with_capacity(model.inputs.len());
    for (k, path) in assign(&declared(model), &arguments)?.iter().enumerate() {
        let tensor = read_input_quantized(path, quantization)?;
        check_holds(quantization, k, &path.display().to_string(), &tensor.data)?;
        tensors.push(tensor);
    }
    Ok(tensors)
}

/// The declared inputs of `model` as (name, shape) pairs, for [`assign`].
pub(crate) fn declared(model: &cvm_engine::Model) -> Vec<(String, Vec<u32>)> {
    model
        .inputs
        .iter()
        .map(|input| (input.name.clone(), input.shape.clone()))
        .collect()
}

/// Refuses input `index`'s values (read from the file `at` names) when the model's quantization says they
/// are token ids or a mask and one is not ([`Quantization::check`]).
///
/// # Errors
/// [`HostError::Usage`] naming the file, the input and the value.
pub(crate) fn check_holds(
    quantization: Option<&Quantization>,
    index: usize,
    at: &str,
    data: &[i32],
) -> Result<(), HostError> {
    let Some(quantization) = quantization else {
        return Ok(());
    };
    quantization.check(index, data).map_err(|message| {
        let name = quantization
            .inputs
            .get(index)
            .map(|input| format!(" (input {})", cvm_formats::quote(&input.name)))
            .unwrap_or_default();
        HostError::Usage(format!("{at}{name}: {message}"))
    })
}

/// The single output of an imported model, as float32 through its quantization.
fn write_dequantized(
    path: &Path,
    outputs: &[cvm_engine::outcome::OutputTensor],
    quantization: &Quantization,
) -> Result<(), HostError> {
    let [tensor] = outputs else {
        return Err(HostError::Usage(
            "--dequantize needs a model of one output".into(),
        ));
    };
    let values = quantization.dequantize_output(&tensor.data);
    let bytes = npy::write_npy_f32(&tensor.shape, &values);
    std::fs::write(path, bytes).map_err(|source| HostError::io(path, source))
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
        let target = output_path(path, index, outputs.len());
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

/// Where `--output FILE` writes output `index` of `count`: FILE for a single output; with
/// several, FILE's stem followed by `_<index>.npy`.
pub(crate) fn output_path(path: &Path, index: usize, count: usize) -> PathBuf {
    if count == 1 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}_{index}.npy"))
}
