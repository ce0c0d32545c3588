//! The whole of an ONNX import as `cvm import` and the Python package run it: read the model,
//! calibrate on a float32 `.npy` set, quantize, compare the integer model with the float one
//! on the calibration set (and a validation set, with labels when given), write the model's
//! directory (`symbol`, `params`, `model.cvm`, `quantization.json`), and report it as JSON.
//!
//! A model directory written here loads anywhere a CVM model does
//! (`cvm_formats::model::load_model`); [`quantization_of`] finds the quantization beside it,
//! through which float32 inputs are quantized.

use std::path::{Path, PathBuf};

use cvm_formats::npy::{NpyError, NpyF32Array, read_npy, read_npy_f32};
use cvm_formats::{FileLimit, ReadError, read_file};

use crate::import::{Agreement, Imported, Importer, InputShape, Options, Quantization, Ranges};

/// What an import is given.
#[derive(Clone, Debug)]
pub struct ImportRequest<'a> {
    /// The ONNX file.
    pub model: &'a Path,
    /// The directory the imported model is written into (created when missing).
    pub output: &'a Path,
    /// The calibration set: a float32 `.npy` array of shape (N, …), or for a model of
    /// several inputs one array per input, each named.
    pub calibrate: &'a [SampleFile],
    /// A held-out set, as `calibrate`, to report the agreement (and accuracy) on; empty for
    /// none.
    pub validate: &'a [SampleFile],
    /// The integer labels of the validation set (`.npy`), for the accuracies.
    pub labels: Option<&'a Path>,
    /// One scale per tensor instead of per output channel.
    pub per_tensor: bool,
    /// How int8 activation ranges are chosen from the calibration set (`None`: the graph's
    /// default, [`Options::ranges`]).
    pub ranges: Option<Ranges>,
    /// SmoothQuant: migrate the scales of layer normalizations into the dense layers reading
    /// them ([`Importer::smooth`]), then calibrate again.
    pub smooth: bool,
    /// The values of the input's open dimensions.
    pub input_shapes: &'a [InputShape],
    /// The graph output to import, which a graph of several outputs needs.
    pub graph_output: Option<&'a str>,
    /// The gas schedule version the model is validated and priced under.
    pub schedule: u32,
}

/// Why an import gave no model.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// The request is inconsistent (labels without a validation set, an output that is a file).
    #[error("{0}")]
    Usage(String),
    /// A file could not be read or written, or a sample file is not float32.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The model cannot be imported (the message names the file and the reason).
    #[error("{0}")]
    Import(String),
    /// The engine defines no gas schedule of this version: its deterministic error.
    #[error("{}", .0.message)]
    Schedule(cvm_engine::Error),
}

/// An import done: the model, how closely it follows the float one, and the files written.
pub struct ImportOutcome {
    /// The imported model.
    pub imported: Imported,
    /// Samples the calibration set held.
    pub calibration_samples: usize,
    /// Float and integer outputs compared on the calibration set.
    pub on_calibration: Agreement,
    /// The same on the validation set, when given.
    pub validation: Option<Agreement>,
    /// Each file written, with its size in bytes.
    pub written: Vec<(PathBuf, usize)>,
}

/// A file of samples (`.npy`, N samples first) for one input: `NAME=FILE`, or `FILE` for a
/// model of one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleFile {
    /// The input it is for; `None` for a model's only input.
    pub input: Option<String>,
    /// The file.
    pub path: PathBuf,
}

impl std::str::FromStr for SampleFile {
    type Err = String;

    /// Reads `NAME=FILE`, or `FILE` (a path that exists as written, or holds no `=`).
    fn from_str(text: &str) -> Result<SampleFile, String> {
        if text.is_empty() {
            return Err("an empty file name".into());
        }
        match text.split_once('=') {
            Some((name, path)) if !Path::new(text).exists() => {
                if name.is_empty() || path.is_empty() {
                    return Err(format!("{text:?} is not NAME=FILE or FILE"));
                }
                Ok(SampleFile {
                    input: Some(name.to_string()),
                    path: PathBuf::from(path),
                })
            }
            _ => Ok(SampleFile {
                input: None,
                path: PathBuf::from(text),
            }),
        }
    }
}

/// Most bytes of a calibration or validation file: 2 GiB.
const SAMPLES_LIMIT: FileLimit = FileLimit {
    bytes: 2 << 30,
    what: "sample file (.npy)",
};

/// A float32 `.npy` of samples, or for a model of token ids (`ids`) an integer one, as the
/// float32 values of its integers (exact below 2^24; the importer checks them against the
/// model's vocabulary).
fn read_samples(path: &Path, ids: bool) -> Result<NpyF32Array, ReadError> {
    let bytes = read_file(path, SAMPLES_LIMIT)?;
    let error = |e: NpyError| ReadError::Input(format!("{}: {e}", path.display()));
    match read_npy_f32(&bytes) {
        Err(NpyError::NotFloat32(_)) if ids => {
            let array = read_npy(&bytes).map_err(error)?;
            Ok(NpyF32Array {
                shape: array.shape,
                data: array.data.iter().map(|&v| v as f32).collect(),
            })
        }
        read => read.map_err(error),
    }
}

fn failed(path: &Path, error: impl std::fmt::Display) -> WorkflowError {
    WorkflowError::Import(format!("{}: {error}", path.display()))
}

/// The files of a sample set in the model's input order: one unnamed file for a model of one
/// input, else one named file per input.
fn match_inputs<'f>(
    files: &'f [SampleFile],
    inputs: &[crate::import::ModelInput],
    flag: &str,
) -> Result<Vec<&'f SampleFile>, WorkflowError> {
    let names = || {
        inputs
            .iter()
            .map(|i| cvm_formats::quote(&i.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let [file] = files
        && file.input.is_none()
    {
        if inputs.len() == 1 {
            return Ok(vec![file]);
        }
        return Err(WorkflowError::Usage(format!(
            "{flag} {}: the model has {} inputs ({}); give one file per input as {flag} \
             NAME=FILE",
            file.path.display(),
            inputs.len(),
            names()
        )));
    }
    let mut ordered = Vec::with_capacity(inputs.len());
    for file in files {
        let Some(name) = &file.input else {
            return Err(WorkflowError::Usage(format!(
                "{flag} {}: with several files, each names its input as NAME=FILE",
                file.path.display()
            )));
        };
        if !inputs.iter().any(|i| &i.name == name) {
            return Err(WorkflowError::Usage(format!(
                "{flag} {name}=…: the model has no input {} (its inputs: {})",
                cvm_formats::quote(name),
                names()
            )));
        }
        if files
            .iter()
            .filter(|f| f.input.as_ref() == Some(name))
            .count()
            > 1
        {
            return Err(WorkflowError::Usage(format!(
                "{flag} names input {} twice",
                cvm_formats::quote(name)
            )));
        }
    }
    for input in inputs {
        match files
            .iter()
            .find(|f| f.input.as_deref() == Some(&input.name))
        {
            Some(file) => ordered.push(file),
            None => {
                return Err(WorkflowError::Usage(format!(
                    "{flag} gives no file for input {} (the model's inputs: {})",
                    cvm_formats::quote(&input.name),
                    names()
                )));
            }
        }
    }
    Ok(ordered)
}

/// The arrays of a sample set, in the model's input order.
fn read_set(
    files: &[SampleFile],
    inputs: &[crate::import::ModelInput],
    flag: &str,
) -> Result<Vec<NpyF32Array>, WorkflowError> {
    let mut arrays = Vec::with_capacity(inputs.len());
    for (file, input) in match_inputs(files, inputs, flag)?.into_iter().zip(inputs) {
        let integer = !matches!(input.holds, crate::import::Holds::Float);
        arrays.push(read_samples(&file.path, integer)?);
    }
    Ok(arrays)
}

/// The file a sample set's errors name: its only file, or the first.
fn set_path(files: &[SampleFile]) -> &Path {
    files.first().map_or(Path::new(""), |f| f.path.as_path())
}

/// The checks that need no model, made before the model is read and calibrated so that a
/// mistake in the request is told at once.
///
/// # Errors
/// [`WorkflowError::Usage`] for labels without a validation set or an output that exists and is
/// not a directory; [`WorkflowError::Schedule`] for a schedule version the engine does not
/// define.
pub fn check_request(request: &ImportRequest<'_>) -> Result<(), WorkflowError> {
    if request.calibrate.is_empty() {
        return Err(WorkflowError::Usage(
            "importing an ONNX model needs --calibrate <inputs.npy>: inputs whose ranges set \
             the integer model's scales"
                .into(),
        ));
    }
    if request.labels.is_some() && request.validate.is_empty() {
        return Err(WorkflowError::Usage("--labels needs --validate".into()));
    }
    if request.output.exists() && !request.output.is_dir() {
        return Err(WorkflowError::Usage(format!(
            "-o {}: exists and is not a directory; for an ONNX model, -o names the directory \
             the imported model is written into",
            request.output.display()
        )));
    }
    cvm_engine::schedule_by_version(request.schedule).map_err(WorkflowError::Schedule)?;
    Ok(())
}

/// Imports `request.model` and writes it into `request.output`, calling `progress(phase, done,
/// total)` as samples are evaluated (`phase`: `calibrating`, `recalibrating` after
/// [`ImportRequest::smooth`], `checking`, `validating`).
///
/// # Errors
/// As [`check_request`]; [`WorkflowError::Read`] for a file that cannot be read or written;
/// [`WorkflowError::Import`] when the model, a sample set or the labels do not fit the import.
pub fn import(
    request: &ImportRequest<'_>,
    progress: &mut dyn FnMut(&'static str, usize, usize),
) -> Result<ImportOutcome, WorkflowError> {
    check_request(request)?;
    // The reader's errors name the file already.
    let model =
        crate::read_file(request.model).map_err(|e| WorkflowError::Import(e.to_string()))?;
    let mut importer = Importer::with_output(&model, request.input_shapes, request.graph_output)
        .map_err(|e| failed(request.model, e))?;
    let inputs = importer.inputs();
    let calibration_set = read_set(request.calibrate, &inputs, "--calibrate")?;
    let mut calibration = importer
        .calibrate_inputs(&calibration_set, &mut |d, t| progress("calibrating", d, t))
        .map_err(|e| failed(set_path(request.calibrate), e))?;
    if request.smooth && importer.smooth(&calibration) > 0 {
        calibration = importer
            .calibrate_inputs(&calibration_set, &mut |d, t| {
                progress("recalibrating", d, t)
            })
            .map_err(|e| failed(set_path(request.calibrate), e))?;
    }
    let options = Options {
        per_channel: !request.per_tensor,
        ranges: request.ranges,
        schedule: request.schedule,
    };
    let imported = importer
        .quantize(&calibration, options)
        .map_err(|e| failed(request.model, e))?;
    let on_calibration = importer
        .compare_inputs(&imported, &calibration_set, None, &mut |d, t| {
            progress("checking", d, t)
        })
        .map_err(|e| failed(set_path(request.calibrate), e))?;
    drop(calibration_set);
    let validation = if request.validate.is_empty() {
        None
    } else {
        let set = read_set(request.validate, &inputs, "--validate")?;
        let labels = match request.labels {
            Some(labels) => {
                let bytes = read_file(labels, FileLimit::TENSOR)?;
                let array = read_npy(&bytes)
                    .map_err(|e| ReadError::Input(format!("{}: {e}", labels.display())))?;
                Some(array.data)
            }
            None => None,
        };
        Some(
            importer
                .compare_inputs(&imported, &set, labels.as_deref(), &mut |d, t| {
                    progress("validating", d, t)
                })
                .map_err(|e| failed(set_path(request.validate), e))?,
        )
    };
    let written = write_model_dir(request.output, &imported)?;
    Ok(ImportOutcome {
        imported,
        calibration_samples: calibration.samples,
        on_calibration,
        validation,
        written,
    })
}

/// The name of the quantization file in an imported model's directory.
pub const QUANTIZATION_FILE: &str = "quantization.json";

/// The files of an imported model, written into `dir` (created when missing): `symbol`,
/// `params`, `model.cvm` and `quantization.json`, or for a model of the engine's own operators,
/// which has no CVM pair, `model.cvm` and `quantization.json` only (a `symbol` and `params` an
/// earlier import left there are removed, so that the directory holds one model).
///
/// # Errors
/// [`ReadError::Io`] naming the directory or file that could not be written.
pub fn write_model_dir(
    dir: &Path,
    imported: &Imported,
) -> Result<Vec<(PathBuf, usize)>, ReadError> {
    std::fs::create_dir_all(dir).map_err(|source| ReadError::io(dir, source))?;
    let quantization = imported.quantization.to_json();
    let mut files: Vec<(&str, &[u8])> = vec![
        ("symbol", &imported.symbol),
        ("params", &imported.params),
        ("model.cvm", &imported.canonical),
        (QUANTIZATION_FILE, quantization.as_bytes()),
    ];
    if imported.engine_only {
        files.drain(..2);
        for stale in ["symbol", "params"] {
            let path = dir.join(stale);
            if path.is_file() {
                std::fs::remove_file(&path).map_err(|source| ReadError::io(&path, source))?;
            }
        }
    }
    let mut written = Vec::new();
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|source| ReadError::io(&path, source))?;
        written.push((path, bytes.len()));
    }
    Ok(written)
}

/// Reads a `quantization.json`.
///
/// # Errors
/// [`ReadError`] naming the file when it cannot be read, is not UTF-8 or is not a quantization.
pub fn read_quantization(path: &Path) -> Result<Quantization, ReadError> {
    let bytes = read_file(path, FileLimit::TENSOR)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ReadError::Input(format!("{}: not UTF-8 text", path.display())))?;
    Quantization::from_json(&text).map_err(|e| ReadError::Input(format!("{}: {e}", path.display())))
}

/// The quantization of the model at `model`: a directory's `quantization.json` (as an import
/// writes it), or none for a model file or a directory without one.
///
/// # Errors
/// As [`read_quantization`], when the file is there.
pub fn quantization_of(model: &Path) -> Result<Option<Quantization>, ReadError> {
    let path = model.join(QUANTIZATION_FILE);
    if model.is_dir() && path.is_file() {
        return read_quantization(&path).map(Some);
    }
    Ok(None)
}

/// Quantizes a float32 input of `shape` through `quantization`, as `cvm run` does for a model
/// imported from ONNX.
///
/// # Errors
/// A message when `shape` is not the quantization's input shape.
pub fn quantize_input(
    quantization: &Quantization,
    shape: &[u32],
    values: &[f32],
) -> Result<Vec<i32>, String> {
    if shape != quantization.input_shape {
        return Err(format!(
            "float32 input of shape {shape:?}, the quantization's input is {:?}",
            quantization.input_shape
        ));
    }
    Ok(quantization.quantize_input(values))
}

fn agreement_json(a: &Agreement) -> serde_json::Value {
    serde_json::json!({
        "samples": a.samples,
        "positions": a.positions,
        "same_argmax": a.same_argmax,
        "cosine": {"median": a.median_cosine, "min": a.min_cosine},
        "max_error": a.max_error,
        "max_output": a.max_output,
        "float_correct": a.float_correct,
        "integer_correct": a.int_correct,
    })
}

/// The report of an import as `cvm import --json` prints it.
pub fn report_json(model: &Path, outcome: &ImportOutcome) -> serde_json::Value {
    let imported = &outcome.imported;
    let q = &imported.quantization;
    let layers: Vec<serde_json::Value> = imported
        .layers
        .iter()
        .map(|l| {
            serde_json::json!({
                "node": l.node,
                "cvm_node": l.cvm,
                "input_scale": l.input_scale,
                "weight_scales": [l.weight_scales.min, l.weight_scales.max],
                "accumulator_precision": l.accumulator_precision,
                "pre_shift": l.pre_shift,
                "factors": [l.factors.min, l.factors.max],
                "shift": l.shift,
                "output_scale": l.output_scale,
            })
        })
        .collect();
    let ranges: Vec<serde_json::Value> = imported
        .ranges
        .iter()
        .map(|r| serde_json::json!({"node": r.node, "shape": r.shape, "min": r.min, "max": r.max}))
        .collect();
    let files: Vec<serde_json::Value> = outcome
        .written
        .iter()
        .map(
            |(path, bytes)| serde_json::json!({"path": path.display().to_string(), "bytes": bytes}),
        )
        .collect();
    serde_json::json!({
        "model": model.display().to_string(),
        "operators": imported.operators,
        "gas": imported.gas,
        "schedule": imported.schedule,
        "input": {"shape": q.input_shape, "scale": q.input_scale},
        "inputs": imported.inputs.iter().map(|i| serde_json::json!({
            "name": i.name,
            "shape": i.shape,
            "holds": match i.holds {
                crate::import::Holds::Float => serde_json::json!("float"),
                crate::import::Holds::Ids { vocabulary } => serde_json::json!({"token_ids": vocabulary}),
                crate::import::Holds::Mask => serde_json::json!("mask"),
            },
        })).collect::<Vec<_>>(),
        "output": {"shape": q.output_shape, "scale": q.output_scale},
        "notes": imported.notes,
        "layers": layers,
        "ranges": ranges,
        "calibration": {"samples": outcome.calibration_samples, "agreement": agreement_json(&outcome.on_calibration)},
        "validation": outcome.validation.as_ref().map(agreement_json),
        "files": files,
    })
}
