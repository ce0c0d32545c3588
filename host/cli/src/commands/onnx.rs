//! `cvm import <model.onnx> --calibrate <inputs.npy> -o <dir>`: a float ONNX model to an
//! integer CVM model, with its report.

use cvm_cli::progress::Progress;
use cvm_cli::render::{hundredths, percent, two_decimals};
use cvm_onnx::import::{Agreement, Holds, Imported, RangeReport};
use cvm_onnx::workflow::{self, ImportRequest, WorkflowError};

use super::run::print_report;

use crate::*;

/// What `cvm import` was given for an ONNX model.
pub(crate) struct OnnxImport<'a> {
    pub(crate) model: &'a Path,
    pub(crate) output: &'a Path,
    pub(crate) calibrate: &'a [workflow::SampleFile],
    pub(crate) validate: &'a [workflow::SampleFile],
    pub(crate) labels: Option<&'a Path>,
    pub(crate) per_tensor: bool,
    pub(crate) ranges: Option<cvm_onnx::import::Ranges>,
    pub(crate) smooth: bool,
    pub(crate) input_shapes: &'a [cvm_onnx::import::InputShape],
    pub(crate) graph_output: Option<&'a str>,
    pub(crate) json: bool,
    pub(crate) schedule: u32,
}

/// Whether `path` names an ONNX file (by its extension).
pub(crate) fn is_onnx(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

fn workflow_error(error: WorkflowError, json: bool) -> Result<Failure, Failure> {
    Ok(match error {
        WorkflowError::Usage(message) => HostError::Usage(message).into(),
        WorkflowError::Read(error) => HostError::from(error).into(),
        WorkflowError::Import(message) => HostError::Import(message).into(),
        WorkflowError::Schedule(error) => {
            // As for any model: the engine's outcome for an undefined schedule.
            print_report(
                &cvm_engine::Report::failure(error, 0),
                HashAlgorithm::default(),
                json,
            )?;
            Failure::Deterministic
        }
    })
}

pub(crate) fn import_onnx(args: &OnnxImport<'_>) -> Result<(), Failure> {
    let request = ImportRequest {
        model: args.model,
        output: args.output,
        calibrate: args.calibrate,
        validate: args.validate,
        labels: args.labels,
        per_tensor: args.per_tensor,
        ranges: args.ranges,
        smooth: args.smooth,
        input_shapes: args.input_shapes,
        graph_output: args.graph_output,
        schedule: args.schedule,
    };
    let mut bar: Option<(&'static str, Progress)> = None;
    let outcome = workflow::import(&request, &mut |phase, done, total| {
        if bar.as_ref().is_none_or(|(shown, _)| *shown != phase) {
            bar = Some((phase, Progress::new(phase)));
        }
        if let Some((_, progress)) = &bar {
            progress.update(done, total);
        }
    });
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => return Err(workflow_error(error, args.json)?),
    };
    if args.json {
        outln!("{}", workflow::report_json(args.model, &outcome))?;
    } else {
        out!(
            "{}",
            report_text(
                args,
                &outcome.imported,
                &outcome.on_calibration,
                outcome.validation.as_ref(),
                &outcome.written
            )
        )?;
    }
    Ok(())
}

fn range(r: &RangeReport) -> String {
    if r.min == r.max {
        format!("{:.4e}", r.max)
    } else {
        format!("{:.4e}..{:.4e}", r.min, r.max)
    }
}

fn agreement_text(what: &str, a: &Agreement) -> String {
    let counted = if a.positions == a.samples {
        format!("{} samples", a.samples)
    } else {
        format!("{} samples, {} positions", a.samples, a.positions)
    };
    let mut line = format!(
        "{what} ({counted}): same argmax {}/{} ({}), max |float − integer| {:.4} (outputs up to \
         {:.4}), cosine similarity median {:.4} min {:.4}",
        a.same_argmax,
        a.positions,
        percent(a.same_argmax, a.positions),
        a.max_error,
        a.max_output,
        a.median_cosine,
        a.min_cosine
    );
    if let (Some(f), Some(i)) = (a.float_correct, a.int_correct) {
        line.push_str(&format!(
            "\n  accuracy: float {f}/{} ({}), integer {i}/{} ({}), {} points",
            a.positions,
            percent(f, a.positions),
            a.positions,
            percent(i, a.positions),
            // The difference of the two percentages as printed.
            two_decimals(hundredths(i, a.positions) - hundredths(f, a.positions))
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
    if imported.inputs.len() > 1 {
        for input in &imported.inputs {
            let holds = match input.holds {
                Holds::Float => format!(
                    "scale {:.6e}: q = clip(round(x / scale), −127, 127)",
                    q.input_scale
                ),
                Holds::Ids { vocabulary } => {
                    format!("token ids from 0 to {}", vocabulary.saturating_sub(1))
                }
                Holds::Mask => "attention mask: 1 kept, 0 masked".into(),
            };
            out.push_str(&format!(
                "input  {} {:?}, {holds}\n",
                cvm_formats::quote(&input.name),
                input.shape
            ));
        }
        out.push_str(&format!(
            "output {:?}, scale {:.6e}: y ≈ q · scale\n",
            q.output_shape, q.output_scale
        ));
    } else {
        out.push_str(&format!(
            "input  {:?}, scale {:.6e}: q = clip(round(x / scale), −127, 127)\noutput {:?}, scale {:.6e}: y ≈ q · scale\n",
            q.input_shape, q.input_scale, q.output_shape, q.output_scale
        ));
    }
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
