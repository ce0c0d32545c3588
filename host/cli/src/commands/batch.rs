//! `cvm run MODEL --input batch.npy --batch`: every sample of (N, …) input arrays through one
//! loaded model in one process, with the stacked outputs, one hash line per sample, the
//! accuracy against labels and a summary.
//!
//! The model is read, validated and (in wasm) instantiated once; each sample is then one run of
//! that session, which writes its inputs, arena and reply afresh and gets its fuel afresh, so a
//! sample's outcome and hash are those of a `cvm run` of it alone. A sample that fails
//! deterministically is recorded and the batch goes on; a node-local failure stops it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::time::Duration;

use cvm_cli::inputs::{BatchInput, batch_shape, read_batch};
use cvm_cli::progress::Progress;
use cvm_cli::render::{hundredths, percent, two_decimals};
use cvm_cli::runner::{Session, millis};
use cvm_engine::outcome::OutputTensor;
use cvm_runtime::hash::hex;

use super::run::{RunOptions, check_output_arguments, output_path, print_report, wasm_engine};

use crate::*;

/// The files `--batch` reads and writes beyond `cvm run`'s.
pub(crate) struct BatchFiles<'a> {
    /// `--output`: the stacked outputs, (N, …) per output.
    pub(crate) output: Option<&'a Path>,
    /// `--hashes`: one line per sample.
    pub(crate) hashes: Option<&'a Path>,
    /// `--labels`: one integer label per sample.
    pub(crate) labels: Option<&'a Path>,
}

/// What a batch read before any run: its inputs, in declared order, and the labels.
struct Prepared {
    inputs: Vec<BatchInput>,
    samples: usize,
    labels: Option<Vec<i32>>,
}

pub(crate) fn run_batch(
    source: &ModelSource,
    input_args: &[String],
    options: &RunOptions,
    files: &BatchFiles<'_>,
    cache: &CacheArgs,
    timings: &mut Timings,
    started: Instant,
) -> Result<(), Failure> {
    if options.input_format == Format::Cvm
        || options.output_format == Format::Cvm
        || options.big_endian
    {
        return Err(HostError::Usage(
            "--batch reads .npy inputs and writes .npy outputs; --input-format cvm, \
             --output-format cvm and --big-endian do not apply to it"
                .into(),
        )
        .into());
    }
    check_output_arguments(options, files.output)?;
    let LoadedModel { bytes, model, .. } = super::run::accepted(
        timings.time(phase::READ_MODEL, || load_model(source))?,
        options.hash,
        options.json,
    )?;
    // A model that does not decode is loaded anyway: the engine rejects it deterministically.
    let prepared = match &model {
        Some(model) => {
            let begun = Instant::now();
            let prepared = prepare(model, input_args, options, files)?;
            timings.record(phase::READ_INPUTS, begun.elapsed());
            Some(prepared)
        }
        None => None,
    };
    let wasm = wasm_engine(options.engine, cache, timings)?;
    // The stacked outputs' shapes come from validation; in wasm the host validates natively for
    // them (once, only with --output), as the engine inside does.
    let validated_shapes = match (files.output, options.engine) {
        (Some(_), EngineKind::Wasm) => cvm_engine::load(&bytes, options.schedule)
            .ok()
            .map(|validated| output_shapes(&validated)),
        _ => None,
    };
    let mut session = match Session::load(
        options.engine,
        wasm.as_ref(),
        bytes,
        options.schedule,
        timings,
    )? {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, options.hash, options.json)?;
            return Err(Failure::Deterministic);
        }
    };
    let Some(prepared) = prepared else {
        return Err(HostError::Wasm(
            "the engine loaded a model whose bytes do not decode on the host".into(),
        )
        .into());
    };
    let output_shapes = match (&session, validated_shapes) {
        (Session::Native(validated), _) => output_shapes(validated),
        (Session::Wasm(_), Some(shapes)) => shapes,
        (Session::Wasm(_), None) if files.output.is_some() => {
            return Err(HostError::Wasm(
                "the model loads in wasm but the host's validation, which gives the outputs' \
                 shapes, rejects it"
                    .into(),
            )
            .into());
        }
        (Session::Wasm(_), None) => Vec::new(),
    };
    let mut outputs = match files.output {
        Some(path) => Some(Outputs::create(
            path,
            &output_shapes,
            prepared.samples,
            options,
        )?),
        None => None,
    };
    let mut hashes = match files.hashes {
        Some(path) => Some((
            path,
            BufWriter::new(File::create(path).map_err(|source| HostError::io(path, source))?),
        )),
        None => None,
    };

    let runs_started = Instant::now();
    let progress = Progress::new("running");
    let mut tally = Tally::default();
    for index in 0..prepared.samples {
        let inputs = prepared
            .inputs
            .iter()
            .map(|input| input.sample(index))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| HostError::input(format!("sample {index} lies past its batch")))?;
        let report = session.run(inputs, options.gas_limit, timings)?;
        let label = prepared
            .labels
            .as_ref()
            .and_then(|labels| labels.get(index).copied());
        tally.add(&report, label);
        if let Some((path, writer)) = &mut hashes {
            let hash = timings.time(phase::HASHING, || outcome_hash(&report, options.hash));
            let status = status_name(&report);
            writeln!(
                writer,
                "{index} {status} {} {}",
                report.outcome.gas_used,
                hex(&hash)
            )
            .map_err(|source| HostError::io(*path, source))?;
        }
        if let Some(outputs) = &mut outputs {
            outputs.write_sample(&report)?;
        }
        progress.update(index + 1, prepared.samples);
    }
    let runs = runs_started.elapsed();
    timings.record_memory(session.planned_bytes(), session.engine_bytes());
    if let Some(outputs) = outputs {
        outputs.finish()?;
    }
    if let Some((path, mut writer)) = hashes {
        writer
            .flush()
            .map_err(|source| HostError::io(path, source))?;
    }
    let summary = Summary {
        tally: &tally,
        labelled: prepared.labels.is_some(),
        engine: options.engine,
        wall: started.elapsed(),
        runs,
    };
    if options.json {
        outln!("{}", summary.json())?;
    } else {
        out!("{}", summary.text())?;
    }
    if tally.failed() > 0 {
        return Err(Failure::Deterministic);
    }
    Ok(())
}

/// Reads the batch of every declared input and the labels, and checks them against each other
/// and the output options, before the engine is built.
fn prepare(
    model: &cvm_engine::Model,
    input_args: &[String],
    options: &RunOptions,
    files: &BatchFiles<'_>,
) -> Result<Prepared, HostError> {
    let outputs = model.outputs.len();
    if outputs != 1 && files.labels.is_some() {
        return Err(HostError::Usage(format!(
            "--labels compares the argmax of a model's one output; this model has {outputs}"
        )));
    }
    if outputs != 1 && options.dequantize {
        return Err(HostError::Usage(format!(
            "--dequantize needs a model of one output; this model has {outputs}"
        )));
    }
    let arguments: Vec<InputArg> = input_args.iter().map(|a| InputArg::parse(a)).collect();
    let declared = super::run::declared(model);
    let paths = assign(&declared, &arguments)?;
    let mut inputs = Vec::with_capacity(paths.len());
    for (k, (path, (name, shape))) in paths.iter().zip(&declared).enumerate() {
        let batch = read_batch(path, name, shape, options.quantization.as_ref())?;
        let size = batch.data.len() / batch.samples.max(1);
        for (n, sample) in batch.data.chunks(size.max(1)).enumerate() {
            let at = format!("{} sample {n}", path.display());
            super::run::check_holds(options.quantization.as_ref(), k, &at, sample)?;
        }
        inputs.push((path, name, batch));
    }
    let samples = inputs.first().map_or(0, |(_, _, batch)| batch.samples);
    if let Some((path, name, batch)) = inputs.iter().find(|(_, _, b)| b.samples != samples) {
        let (first_path, first_name, _) = &inputs[0];
        return Err(HostError::Usage(format!(
            "--batch: {} holds {} samples of input \"{name}\", {} holds {samples} of \
             \"{first_name}\"; every input's batch needs one row per sample",
            path.display(),
            batch.samples,
            first_path.display()
        )));
    }
    if samples == 0 {
        return Err(HostError::Usage(
            "--batch needs a model with at least one input".into(),
        ));
    }
    let labels = match files.labels {
        Some(path) => {
            let array = cvm_formats::text::read_npy_file(path).map_err(HostError::input)?;
            if array.data.len() != samples {
                return Err(HostError::Usage(format!(
                    "{}: {} labels (shape {:?}) for {samples} samples; --labels needs one \
                     integer label per sample",
                    path.display(),
                    array.data.len(),
                    array.shape
                )));
            }
            Some(array.data)
        }
        None => None,
    };
    Ok(Prepared {
        inputs: inputs.into_iter().map(|(_, _, batch)| batch).collect(),
        samples,
        labels,
    })
}

/// The shape of every output of a validated model, in declared order.
fn output_shapes(validated: &cvm_engine::ValidatedModel) -> Vec<Vec<u32>> {
    validated
        .outputs
        .iter()
        .map(|(_, id)| {
            validated
                .value_types
                .get(*id)
                .map(|ty| ty.shape.0.clone())
                .unwrap_or_default()
        })
        .collect()
}

/// The status a hash line gives: `ok`, or the error code's name.
fn status_name(report: &Report) -> &'static str {
    match &report.outcome.status {
        Status::Ok { .. } => "ok",
        Status::Error { .. } => report
            .error_code()
            .map_or("Unknown", cvm_engine::ErrorCode::name),
    }
}

/// The index of the largest value, the first on ties; `None` for no value.
fn argmax(values: &[i32]) -> Option<usize> {
    let mut best: Option<(usize, i32)> = None;
    for (index, &value) in values.iter().enumerate() {
        if best.is_none_or(|(_, largest)| value > largest) {
            best = Some((index, value));
        }
    }
    best.map(|(index, _)| index)
}

/// The stacked outputs of `--output`: one `.npy` file per output, (N, …) as
/// [`batch_shape`] says, written sample by sample; a failed sample's rows are zeros.
struct Outputs {
    files: Vec<OutputFile>,
    /// The float output scale of `--dequantize`.
    dequantize: Option<Quantization>,
}

struct OutputFile {
    path: PathBuf,
    writer: BufWriter<File>,
    /// Values of one sample's output.
    row: usize,
}

impl Outputs {
    fn create(
        path: &Path,
        shapes: &[Vec<u32>],
        samples: usize,
        options: &RunOptions,
    ) -> Result<Outputs, HostError> {
        let dequantize = match (&options.quantization, options.dequantize) {
            (Some(quantization), true) => Some(quantization.clone()),
            _ => None,
        };
        let n = u32::try_from(samples)
            .map_err(|_| HostError::Usage(format!("--output: {samples} samples exceed 2^32")))?;
        let mut files = Vec::with_capacity(shapes.len());
        for (index, shape) in shapes.iter().enumerate() {
            let target = output_path(path, index, shapes.len());
            let stacked = batch_shape(n, shape);
            let header = match dequantize {
                Some(_) => npy::header_f32(&stacked),
                None => npy::header_i32(&stacked),
            };
            let row = shape.iter().map(|&dim| dim as usize).product();
            let mut writer = BufWriter::new(
                File::create(&target).map_err(|source| HostError::io(&target, source))?,
            );
            writer
                .write_all(&header)
                .map_err(|source| HostError::io(&target, source))?;
            files.push(OutputFile {
                path: target,
                writer,
                row,
            });
        }
        Ok(Outputs { files, dequantize })
    }

    /// Appends the outputs of one sample, zeros for a failed one.
    fn write_sample(&mut self, report: &Report) -> Result<(), HostError> {
        let tensors: &[OutputTensor] = match &report.outcome.status {
            Status::Ok { outputs } => outputs,
            Status::Error { .. } => &[],
        };
        for (index, file) in self.files.iter_mut().enumerate() {
            // The engine's outputs have the validated shapes; a row of another length would make
            // the file unreadable, so it is refused as a host failure.
            let data: Option<&[i32]> = tensors.get(index).map(|t| t.data.as_slice());
            if let Some(data) = data
                && data.len() != file.row
            {
                return Err(HostError::Wasm(format!(
                    "output {index} has {} values, its validated shape {}",
                    data.len(),
                    file.row
                )));
            }
            let written = match (&self.dequantize, data) {
                (Some(quantization), Some(data)) => {
                    npy::write_f32_values(&mut file.writer, &quantization.dequantize_output(data))
                }
                (Some(_), None) => npy::write_f32_values(&mut file.writer, &vec![0.0; file.row]),
                (None, Some(data)) => npy::write_i32_values(&mut file.writer, data),
                (None, None) => npy::write_i32_values(&mut file.writer, &vec![0; file.row]),
            };
            written.map_err(|source| HostError::io(&file.path, source))?;
        }
        Ok(())
    }

    fn finish(self) -> Result<(), HostError> {
        for mut file in self.files {
            file.writer
                .flush()
                .map_err(|source| HostError::io(&file.path, source))?;
        }
        Ok(())
    }
}

/// What the samples came to.
#[derive(Default)]
struct Tally {
    samples: usize,
    ok: usize,
    /// Failed samples by error code name.
    failures: BTreeMap<&'static str, usize>,
    gas_total: u64,
    gas_min: Option<u64>,
    gas_max: u64,
    /// Samples whose argmax equals their label.
    correct: usize,
}

impl Tally {
    fn add(&mut self, report: &Report, label: Option<i32>) {
        self.samples += 1;
        let gas = report.outcome.gas_used;
        self.gas_total = self.gas_total.saturating_add(gas);
        self.gas_min = Some(self.gas_min.map_or(gas, |min| min.min(gas)));
        self.gas_max = self.gas_max.max(gas);
        match &report.outcome.status {
            Status::Ok { outputs } => {
                self.ok += 1;
                let predicted = outputs.first().and_then(|output| argmax(&output.data));
                if let (Some(label), Some(predicted)) = (label, predicted)
                    && i64::from(label) == predicted as i64
                {
                    self.correct += 1;
                }
            }
            Status::Error { .. } => *self.failures.entry(status_name(report)).or_default() += 1,
        }
    }

    fn failed(&self) -> usize {
        self.samples - self.ok
    }
}

/// The summary printed at the end of a batch.
struct Summary<'a> {
    tally: &'a Tally,
    labelled: bool,
    engine: EngineKind,
    /// From the command's start to the last sample.
    wall: Duration,
    /// The sample loop alone: runs, hashing, writing.
    runs: Duration,
}

impl Summary<'_> {
    fn per_sample(&self) -> Duration {
        let samples = self.tally.samples.max(1) as u128;
        Duration::from_nanos(u64::try_from(self.runs.as_nanos() / samples).unwrap_or(u64::MAX))
    }

    fn text(&self) -> String {
        let t = self.tally;
        let codes: Vec<String> = t
            .failures
            .iter()
            .map(|(code, count)| format!("{count} {code}"))
            .collect();
        let mut text = format!(
            "samples:  {} ({} ok, {} failed{})\n",
            t.samples,
            t.ok,
            t.failed(),
            if codes.is_empty() {
                String::new()
            } else {
                format!(": {}", codes.join(", "))
            }
        );
        let gas_min = t.gas_min.unwrap_or_default();
        text.push_str(&if gas_min == t.gas_max {
            format!("gas:      {} in all, {gas_min} per sample\n", t.gas_total)
        } else {
            format!(
                "gas:      {} in all, per sample min {gas_min} max {}\n",
                t.gas_total, t.gas_max
            )
        });
        if self.labelled {
            text.push_str(&format!(
                "accuracy: {}/{} ({})\n",
                t.correct,
                t.samples,
                percent(t.correct, t.samples)
            ));
        }
        text.push_str(&format!(
            "time:     {} s in all, {} ms per sample ({} s for the {} samples, {})\n",
            seconds(self.wall),
            millis(self.per_sample()),
            seconds(self.runs),
            t.samples,
            self.engine.name()
        ));
        text
    }

    fn json(&self) -> serde_json::Value {
        let t = self.tally;
        let number = |text: String| {
            text.parse::<serde_json::Number>()
                .map_or(serde_json::Value::Null, serde_json::Value::Number)
        };
        serde_json::json!({
            "samples": t.samples,
            "ok": t.ok,
            "failed": t.failed(),
            "failures": t.failures,
            "gas": {
                "total": t.gas_total,
                "min": t.gas_min.unwrap_or_default(),
                "max": t.gas_max,
            },
            "accuracy": self.labelled.then(|| serde_json::json!({
                "correct": t.correct,
                "samples": t.samples,
                "percent": number(two_decimals(hundredths(t.correct, t.samples))),
            })),
            "engine": self.engine.name(),
            "time_ms": {
                "wall": number(millis(self.wall)),
                "samples": number(millis(self.runs)),
                "per_sample": number(millis(self.per_sample())),
            },
        })
    }
}

/// `duration` in seconds with three decimals (integer arithmetic).
fn seconds(duration: Duration) -> String {
    let millis = duration.as_millis();
    format!("{}.{:03}", millis / 1000, millis % 1000)
}

#[cfg(test)]
mod tests {
    use super::argmax;

    #[test]
    fn argmax_takes_the_first_of_equal_largest_values() {
        assert_eq!(argmax(&[3, 7, 7, -1]), Some(1));
        assert_eq!(argmax(&[-5, -9]), Some(0));
        assert_eq!(argmax(&[i32::MIN, i32::MIN]), Some(0));
        assert_eq!(argmax(&[]), None);
    }
}
