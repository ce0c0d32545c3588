//! `cvm import <model.onnx> --calibrate <inputs.npy> -o <dir>`: a float ONNX model to an
//! integer CVM model, with its report.

use cvm_cli::progress::Progress;
use cvm_cli::render::{hundredths, percent, two_decimals};
use cvm_formats::npy::{NpyError, NpyF32Array, read_npy, read_npy_f32};
use cvm_onnx::import::{Agreement, Imported, Importer, Options, RangeReport};

use super::run::print_report;

use crate::*;

/// What `cvm import` was given for an ONNX model.
pub(crate) struct OnnxImport<'a> {
    pub(crate) model: &'a Path,
    pub(crate) output: &'a Path,
    pub(crate) calibrate: &'a Path,
    pub(crate) validate: Option<&'a Path>,
    pub(crate) labels: Option<&'a Path>,
    pub(crate) per_tensor: bool,
    pub(crate) input_shapes: &'a [cvm_onnx::import::InputShape],
    pub(crate) json: bool,
    pub(crate) schedule: u32,
}

/// Whether `path` names an ONNX file (by its extension).
pub(crate) fn is_onnx(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// Most bytes of a calibration or validation file: 2 GiB.
const SAMPLES_LIMIT: FileLimit = FileLimit {
    bytes: 2 << 30,
    what: "sample file (.npy)",
};

/// A float32 `.npy` of samples, or for a model of token ids (`ids`) an integer one, as the
/// float32 values of its integers (exact below 2^24; the importer checks them against the
/// model's vocabulary).
fn read_samples(path: &Path, ids: bool) -> Result<NpyF32Array, HostError> {
    let bytes = read_file(path, SAMPLES_LIMIT)?;
    let error = |e: NpyError| HostError::input(format!("{}: {e}", path.display()));
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

fn failed(path: &Path, error: impl std::fmt::Display) -> HostError {
    HostError::Import(format!("{}: {error}", path.display()))
}

/// The checks that need no model: made before the model is read and calibrated, so a mistake
/// in the arguments is told at once.
fn check_arguments(args: &OnnxImport<'_>) -> Result<(), Failure> {
    if args.labels.is_some() && args.validate.is_none() {
        return Err(HostError::Usage("--labels needs --validate".into()).into());
    }
    if args.output.exists() && !args.output.is_dir() {
        return Err(HostError::Usage(format!(
            "-o {}: exists and is not a directory; for an ONNX model, -o names the directory \
             the imported model is written into",
            args.output.display()
        ))
        .into());
    }
    if let Err(error) = cvm_engine::schedule_by_version(args.schedule) {
        // As for any model: the engine's outcome for an undefined schedule.
        print_report(
            &cvm_engine::Report::failure(error, 0),
            HashAlgorithm::default(),
            args.json,
        )?;
        return Err(Failure::Deterministic);
    }
    Ok(())
}

pub(crate) fn import_onnx(args: &OnnxImport<'_>) -> Result<(), Failure> {
    check_arguments(args)?;
    // The reader's errors name the file already.
    let model = cvm_onnx::read_file(args.model).map_err(|e| HostError::Import(e.to_string()))?;
    let importer = Importer::with_input_shapes(&model, args.input_shapes)
        .map_err(|e| failed(args.model, e))?;
    let ids = importer.vocabulary().is_some();
    let calibration_set = read_samples(args.calibrate, ids)?;
    let progress = Progress::new("calibrating");
    let calibration = importer
        .calibrate(&calibration_set, &mut |d, t| progress.update(d, t))
        .map_err(|e| failed(args.calibrate, e))?;
    let options = Options {
        per_channel: !args.per_tensor,
        schedule: args.schedule,
    };
    let imported = importer
        .quantize(&calibration, options)
        .map_err(|e| failed(args.model, e))?;
    let progress = Progress::new("checking");
    let on_calibration = importer
        .compare(&imported, &calibration_set, None, &mut |d, t| {
            progress.update(d, t)
        })
        .map_err(|e| failed(args.calibrate, e))?;
    drop(calibration_set);
    let validation = match args.validate {
        Some(path) => {
            let set = read_samples(path, ids)?;
            let labels = match args.labels {
                Some(labels) => {
                    let bytes = read_file(labels, FileLimit::TENSOR)?;
                    let array = read_npy(&bytes)
                        .map_err(|e| HostError::input(format!("{}: {e}", labels.display())))?;
                    Some(array.data)
                }
                None => None,
            };
            let progress = Progress::new("validating");
            Some(
                importer
                    .compare(&imported, &set, labels.as_deref(), &mut |d, t| {
                        progress.update(d, t)
                    })
                    .map_err(|e| failed(path, e))?,
            )
        }
        None => None,
    };
    let written = write(args.output, &imported)?;
    if args.json {
        outln!(
            "{}",
            report_json(
                args,
                &imported,
                calibration.samples,
                &on_calibration,
                validation.as_ref(),
                &written
            )
        )?;
    } else {
        out!(
            "{}",
            report_text(
                args,
                &imported,
                &on_calibration,
                validation.as_ref(),
                &written
            )
        )?;
    }
    Ok(())
}

/// The files of an imported model, written into `dir` (created when missing): `symbol`,
/// `params`, `model.cvm` and `quantization.json`, or for a model of the engine's own operators,
/// which has no CVM pair, `model.cvm` and `quantization.json` only (a `symbol` and `params` an
/// earlier import left there are removed, so that the directory holds one model).
fn write(dir: &Path, imported: &Imported) -> Result<Vec<(PathBuf, usize)>, HostError> {
    std::fs::create_dir_all(dir).map_err(|source| HostError::io(dir, source))?;
    let quantization = imported.quantization.to_json();
    let mut files: Vec<(&str, &[u8])> = vec![
        ("symbol", &imported.symbol),
        ("params", &imported.params),
        ("model.cvm", &imported.canonical),
        ("quantization.json", quantization.as_bytes()),
    ];
    if imported.engine_only {
        files.drain(..2);
        for stale in ["symbol", "params"] {
            let path = dir.join(stale);
            if path.is_file() {
                std::fs::remove_file(&path).map_err(|source| HostError::io(&path, source))?;
            }
        }
    }
    let mut written = Vec::new();
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|source| HostError::io(&path, source))?;
        written.push((path, bytes.len()));
    }
    Ok(written)
}

fn range(r: &RangeReport) -> String {
    if r.min == r.max {
        format!("{:.4e}", r.max)
    } else {
        format!("{:.4e}..{:.4e}", r.min, r.max)
    }
}

fn agreement_text(what: &str, a: &Agreement) -> String {
    let mut line = format!(
        "{what} ({} samples): same argmax {}/{} ({}), max |float − integer| {:.4} (outputs up to {:.4})",
        a.samples,
        a.same_argmax,
        a.samples,
        percent(a.same_argmax, a.samples),
        a.max_error,
        a.max_output
    );
    if let (Some(f), Some(i)) = (a.float_correct, a.int_correct) {
        line.push_str(&format!(
            "\n  accuracy: float {f}/{} ({}), integer {i}/{} ({}), {} points",
            a.samples,
            percent(f, a.samples),
            a.samples,
            percent(i, a.samples),
            // The difference of the two percentages as printed.
            two_decimals(hundredths(i, a.samples) - hundredths(f, a.samples))
        ));
    }
    line.push('\n');
    line
}

fn report_text(
    args: &OnnxImport<'_>,
    imported: &Imported,
    on_calibration: &Agreement,
    validation: Option<&Agreement>,
    written: &[(PathBuf, usize)],
) -> String {
    let q = &imported.quantization;
    let mut out = format!(
        "imported {}: {} CVM operator nodes, {} gas per inference (schedule v{})\n",
        args.model.display(),
        imported.operators,
        imported.gas,
        imported.schedule
    );
    out.push_str(&format!(
        "input  {:?}, scale {:.6e}: q = clip(round(x / scale), −127, 127)\noutput {:?}, scale {:.6e}: y ≈ q · scale\n",
        q.input_shape, q.input_scale, q.output_shape, q.output_scale
    ));
    for note in &imported.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    if imported.engine_only {
        out.push_str(
            "note: the model uses the engine's own operators (batch_matmul, softmax, \
             layer_norm), which the deployed CVM runtime does not have: it is written as \
             model.cvm only, with no symbol + params pair\n",
        );
    }
    out.push_str("layers (requantization: q_out = clip(round(acc · M / 2^n)), acc first shifted right by s when above 16 bits):\n");
    for layer in &imported.layers {
        let requant = if layer.shift == 0 {
            "int32 output, not requantized".to_string()
        } else {
            format!(
                "s {} M {}..{} n {}",
                layer.pre_shift, layer.factors.min as i64, layer.factors.max as i64, layer.shift
            )
        };
        out.push_str(&format!(
            "  {}  -> {}  in {:.4e}  w {}  acc p{}  {}  out {:.4e}\n",
            layer.node,
            layer.cvm,
            layer.input_scale,
            range(&layer.weight_scales),
            layer.accumulator_precision,
            requant,
            layer.output_scale
        ));
    }
    out.push_str("calibrated ranges:\n");
    for value in &imported.ranges {
        out.push_str(&format!(
            "  {}  {:?}  [{:.4}, {:.4}]\n",
            value.node, value.shape, value.min, value.max
        ));
    }
    out.push_str(&agreement_text("calibration set", on_calibration));
    if let Some(validation) = validation {
        out.push_str(&agreement_text("validation set", validation));
    }
    for (path, bytes) in written {
        out.push_str(&format!("wrote {} ({bytes} bytes)\n", path.display()));
    }
    out
}

fn agreement_json(a: &Agreement) -> serde_json::Value {
    serde_json::json!({
        "samples": a.samples,
        "same_argmax": a.same_argmax,
        "max_error": a.max_error,
        "max_output": a.max_output,
        "float_correct": a.float_correct,
        "integer_correct": a.int_correct,
    })
}

fn report_json(
    args: &OnnxImport<'_>,
    imported: &Imported,
    calibration_samples: usize,
    on_calibration: &Agreement,
    validation: Option<&Agreement>,
    written: &[(PathBuf, usize)],
) -> serde_json::Value {
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
    let files: Vec<serde_json::Value> = written
        .iter()
        .map(
            |(path, bytes)| serde_json::json!({"path": path.display().to_string(), "bytes": bytes}),
        )
        .collect();
    serde_json::json!({
        "model": args.model.display().to_string(),
        "operators": imported.operators,
        "gas": imported.gas,
        "schedule": imported.schedule,
        "input": {"shape": q.input_shape, "scale": q.input_scale},
        "output": {"shape": q.output_shape, "scale": q.output_scale},
        "notes": imported.notes,
        "layers": layers,
        "ranges": ranges,
        "calibration": {"samples": calibration_samples, "agreement": agreement_json(on_calibration)},
        "validation": validation.map(agreement_json),
        "files": files,
    })
}
