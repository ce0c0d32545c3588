//! Whole runs as a validator pays for them (`calibrate --runs`): every configuration of the
//! calibration cases at the small, medium and large sizes, alone and as a chain of the same operator, run the way
//! `cvm run` runs a model (a fresh `engine.wasm` instance, the model loaded, the inputs written
//! into it, then the run), and the wall time of the run phase (`cvm run --timings`) related to
//! the model's whole gas, run gas included.
//!
//! A fresh instance pays what a warm one does not: growing the linear memory to the model's
//! arena and touching it first. The per-node calibration cannot see that cost; these runs do,
//! and fit the schedule's run prices (`Schedule::run`) to it.
//!
//! Wall time drifts on a shared machine. Every sample of a model is paired with a sample of a
//! fixed reference model run just before it, and a model's time is the median of its ratios to
//! the reference, times the median time of the reference over the whole measurement: drift in
//! the machine's speed scales both and cancels.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use cvm_cli::runner::{self, EngineKind, Timings, phase};
use cvm_engine::ValidatedModel;
use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Schedule;
use cvm_engine::limits::MAX_GAS_PER_RUN;
use cvm_engine::model::{Model, Node, ValueRef};
use cvm_runtime::wasm::WasmEngine;

use super::cases::{self, Built, Config, LARGE, MEDIUM, SMALL};
use super::cli::Options;
use super::fit;
use super::stats::median;
use super::{SCHEDULE, in_band, terms};

/// Nodes of a chain.
pub const CHAIN: u64 = 8;
/// Most gas a measured model may cost: a larger one is built at half its target until it fits
/// (about 0.8 s of wasm time).
const GAS_CAP: u64 = 1 << 30;
/// Sampling stops after this much time per model, once [`MIN_SAMPLES`] are taken.
const BUDGET: Duration = Duration::from_millis(300);
/// At least this many samples per model.
const MIN_SAMPLES: usize = 3;
/// At most this many samples per model.
const MAX_SAMPLES: usize = 15;
/// The reference model's operator and configuration: a 3 × 3 convolution, the most common node
/// of real models, at the medium size (a few milliseconds).
const REFERENCE: (&str, &str) = ("conv2d", "3x3 16->16");

/// One measured model.
#[derive(Clone, Debug)]
pub struct RunRow {
    /// "op" or "op (config)".
    pub label: String,
    /// Size class.
    pub size: &'static str,
    /// Nodes: 1, or [`CHAIN`] for a chain.
    pub nodes: u64,
    /// The model's whole gas (`total_gas`).
    pub gas: u64,
    /// Its run gas (`run_gas`).
    pub run_gas: u64,
    /// Elements of the inputs, the outputs and the arena beyond the inputs
    /// ([`Schedule::fresh_arena`]): the counts the run rates price.
    pub elements: [u64; 3],
    /// Median ratio of the run phase's wall time to the reference's.
    pub ratio: f64,
    /// Samples taken.
    pub samples: usize,
}

/// Every measured model, and the reference's median run time.
pub struct Runs {
    /// The models, in the order of the operator table.
    pub rows: Vec<RunRow>,
    /// Median wall time of the reference's run phase, ns.
    pub reference_ns: f64,
    /// Cases that failed to build, validate or run.
    pub failures: Vec<String>,
    /// Wall time of the whole measurement.
    pub elapsed: Duration,
}

impl Runs {
    /// The run phase of `row`, ns: its ratio to the reference times the reference's median.
    pub fn ns(&self, row: &RunRow) -> f64 {
        row.ratio * self.reference_ns
    }
}

/// `built`'s single node applied `length` times, each application taking the previous one's
/// output in place of the model's first input; `None` when the node does not take the first
/// input, the model has more than one output, or the chain does not validate (the node changes
/// its operand's shape or precision).
pub fn chain(built: &Built, length: u64) -> Option<Model> {
    let model = &built.model;
    let node = model.nodes.first()?;
    let first = ValueRef::Input(0);
    let position = node.inputs.iter().position(|v| *v == first)?;
    if model.nodes.len() != 1 || model.outputs.len() != 1 {
        return None;
    }
    let mut chained = model.clone();
    chained.nodes = (0..length)
        .map(|i| {
            let mut link = Node {
                name: format!("link{i}"),
                ..node.clone()
            };
            if i > 0 {
                link.inputs[position] = ValueRef::Node {
                    node: (i - 1) as u32,
                    output: 0,
                };
            }
            link
        })
        .collect();
    chained.outputs[0].value = ValueRef::Node {
        node: (length - 1) as u32,
        output: 0,
    };
    ValidatedModel::from_bytes(&chained.encode(), SCHEDULE)
        .ok()
        .map(|_| chained)
}

/// A model ready to run: its bytes, inputs and validated figures.
struct Subject {
    label: String,
    size: &'static str,
    nodes: u64,
    bytes: Vec<u8>,
    inputs: Vec<InputTensor>,
    validated: ValidatedModel,
}

impl Subject {
    fn new(
        label: String,
        size: &'static str,
        nodes: u64,
        model: &Model,
        inputs: &[InputTensor],
    ) -> Result<Subject, String> {
        let bytes = model.encode();
        let validated = ValidatedModel::from_bytes(&bytes, SCHEDULE)
            .map_err(|e| format!("{label} {size}: the model does not validate: {e}"))?;
        Ok(Subject {
            label,
            size,
            nodes,
            bytes,
            inputs: inputs.to_vec(),
            validated,
        })
    }

    /// Whether the model runs to completion natively.
    fn runs_natively(&self) -> bool {
        cvm_engine::run(&self.validated, self.inputs.clone(), MAX_GAS_PER_RUN)
            .error_code()
            .is_none()
    }

    /// The run phase of one `cvm run` of the model in a fresh instance.
    fn run_once(&self, engine: &WasmEngine) -> Result<Duration, String> {
        let mut timings = Timings::default();
        let report = runner::execute_timed(
            EngineKind::Wasm,
            Some(engine),
            self.bytes.clone(),
            self.inputs.clone(),
            MAX_GAS_PER_RUN,
            SCHEDULE.version,
            &mut timings,
        )
        .map_err(|e| format!("{} {}: {e}", self.label, self.size))?;
        if let Some(code) = report.error_code() {
            return Err(format!(
                "{} {}: the run fails with {code:?}",
                self.label, self.size
            ));
        }
        timings
            .phases()
            .iter()
            .find(|(name, _)| *name == phase::RUN)
            .map(|&(_, duration)| duration)
            .ok_or_else(|| "no run phase was timed".into())
    }
}

/// The model of `config` at `target` (halved until it costs at most [`GAS_CAP`]), alone and as
/// a chain where the node keeps its operand's type and the chain runs (its values stay in the
/// operator's range).
fn subjects(config: &Config, size: &'static str, target: u64) -> Result<Vec<Subject>, String> {
    let label = config.label();
    let mut out = Vec::new();
    for nodes in [1, CHAIN] {
        let mut target = target;
        loop {
            let built = config.build(target)?;
            let model = if nodes == 1 {
                Some(built.model.clone())
            } else {
                chain(&built, nodes)
            };
            let Some(model) = model else { break };
            let subject = Subject::new(label.clone(), size, nodes, &model, &built.inputs)?;
            if nodes > 1 && !subject.runs_natively() {
                // The chain's values leave the operator's range (an overflow, a domain error).
                break;
            }
            if subject.validated.total_gas <= GAS_CAP {
                out.push(subject);
                break;
            }
            if target < 2 || config.fixed_class.is_some() {
                break;
            }
            target /= 2;
        }
    }
    Ok(out)
}

/// Samples `subject` against `reference` (each sample of the subject right after one of the
/// reference) and gives the median ratio of their run phases and the reference's times.
fn measure(
    engine: &WasmEngine,
    subject: &Subject,
    reference: &Subject,
) -> Result<(f64, Vec<f64>), String> {
    let started = Instant::now();
    let mut ratios = Vec::new();
    let mut reference_ns = Vec::new();
    while ratios.len() < MAX_SAMPLES && (ratios.len() < MIN_SAMPLES || started.elapsed() < BUDGET) {
        let r = reference.run_once(engine)?.as_nanos().max(1) as f64;
        let t = subject.run_once(engine)?.as_nanos() as f64;
        ratios.push(t / r);
        reference_ns.push(r);
    }
    Ok((median(&mut ratios), reference_ns))
}

/// Measures the configurations of the selected operators at the small, medium and large sizes,
/// alone and chained.
///
/// # Errors
/// When the configurations do not cover the operator table, the reference fails, or wasmtime
/// cannot start.
pub fn measure_all(options: &Options) -> Result<Runs, String> {
    let started = Instant::now();
    let configs = cases::configs()?;
    let engine = WasmEngine::new().map_err(|e| e.to_string())?;
    let reference = configs
        .iter()
        .find(|c| (c.op, c.name) == REFERENCE)
        .ok_or("the reference configuration is missing")?;
    let reference = subjects(reference, MEDIUM.name, MEDIUM.target)?
        .into_iter()
        .next()
        .ok_or("the reference model does not build")?;
    let selected: Vec<&Config> = configs.iter().filter(|c| options.selects(c.op)).collect();
    let mut runs = Runs {
        rows: Vec::new(),
        reference_ns: 0.0,
        failures: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let mut reference_ns = Vec::new();
    for (index, config) in selected.iter().enumerate() {
        let sizes: Vec<(&'static str, u64)> = match config.fixed_class {
            Some(name) => vec![(name, 0)],
            None => [SMALL, MEDIUM, LARGE]
                .iter()
                .map(|c| (c.name, c.target))
                .collect(),
        };
        for (size, target) in sizes {
            let measured = subjects(config, size, target).and_then(|subjects| {
                subjects
                    .into_iter()
                    .map(|subject| {
                        let (ratio, times) = measure(&engine, &subject, &reference)?;
                        let samples = times.len();
                        reference_ns.extend(times);
                        eprintln!(
                            "[{:>3}/{}] {} {} × {}: {:.3} × the reference",
                            index + 1,
                            selected.len(),
                            subject.label,
                            subject.size,
                            subject.nodes,
                            ratio
                        );
                        let inputs = subject.inputs.iter().map(|t| t.data.len() as u64).sum();
                        Ok(RunRow {
                            label: subject.label,
                            size: subject.size,
                            nodes: subject.nodes,
                            gas: subject.validated.total_gas,
                            run_gas: subject.validated.run_gas,
                            elements: [
                                inputs,
                                subject
                                    .validated
                                    .outputs
                                    .iter()
                                    .map(|&(_, id)| {
                                        subject.validated.value_types[id].shape.elements()
                                    })
                                    .sum(),
                                Schedule::fresh_arena(inputs, subject.validated.arena_bytes / 4),
                            ],
                            ratio,
                            samples,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()
            });
            match measured {
                Ok(rows) => runs.rows.extend(rows),
                Err(error) => {
                    eprintln!("failed: {error}");
                    runs.failures.push(error);
                }
            }
        }
    }
    runs.reference_ns = median(&mut reference_ns);
    runs.elapsed = started.elapsed();
    Ok(runs)
}

/// Wall time per gas of every row, normalised to their median; and that median, ns per gas.
pub fn per_gas(runs: &Runs) -> (Vec<f64>, f64) {
    let raw: Vec<f64> = runs
        .rows
        .iter()
        .map(|row| runs.ns(row) / row.gas.max(1) as f64)
        .collect();
    let median_ns = median(&mut raw.clone());
    (raw.iter().map(|v| v / median_ns).collect(), median_ns)
}

/// The run prices the runs propose: each run's time converted to gas at the median ns per gas,
/// fitted as its node gas times a factor plus a base plus the schedule's rates per input,
/// output and arena element each scaled by a factor. Gives the base (gas) and the three rates
/// (hundredths).
pub fn proposed_run(runs: &Runs, ns_per_gas: f64) -> (u64, [u64; 3]) {
    let run = SCHEDULE.run;
    let rates = [run.input, run.output, run.arena];
    let samples: Vec<(Vec<f64>, f64)> = runs
        .rows
        .iter()
        .map(|row| {
            let mut x = vec![1.0];
            x.extend(
                row.elements
                    .iter()
                    .zip(rates)
                    .map(|(&n, rate)| (n * rate) as f64 / cvm_engine::gas::RATE_SCALE as f64),
            );
            x.push((row.gas - row.run_gas) as f64);
            (x, runs.ns(row) / ns_per_gas)
        })
        .collect();
    match fit::bounded(&samples, &terms(rates.len() + 1)) {
        Some(theta) => (
            theta[0].round() as u64,
            [0, 1, 2].map(|k| ((rates[k] as f64 * theta[k + 1]).round() as u64).max(1)),
        ),
        None => (run.base, rates),
    }
}

/// The generated file of `--runs`: conditions, the run prices proposed, the models outside the
/// band, and every model's figures.
pub fn markdown(options: &Options, runs: &Runs) -> String {
    let (normalised, ns_per_gas) = per_gas(runs);
    let (base, [input, output, arena]) = proposed_run(runs, ns_per_gas);
    let run = SCHEDULE.run;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Whole runs under gas schedule {}\n\n\
         Generated by `{}`; do not edit. \
         `docs/gas.md` explains the method.\n\n\
         - Machine: {}.\n\
         - {} models measured in {:.0} s: every calibration configuration at the small, medium \
         and large sizes, alone and as a chain of {CHAIN} nodes where the node keeps its operand's \
         type; each run as `cvm run` runs it (a fresh instance), timed over its run phase, and \
         paired with a run of the reference model ({} {}, {:.3} ms).\n\
         - Median: {ns_per_gas:.3} ns of wasm time per gas.\n",
        SCHEDULE.version,
        super::generated_by(options),
        super::machine(),
        runs.rows.len(),
        runs.elapsed.as_secs_f64(),
        REFERENCE.0,
        REFERENCE.1,
        runs.reference_ns / 1e6,
    );
    let _ = writeln!(
        out,
        "Run gas: base {} gas, per input, output and arena element {}, {} and {} hundredths; \
         proposed from these runs: base {base} gas, {input}, {output} and {arena} hundredths.\n",
        run.base, run.input, run.output, run.arena
    );
    let outside: Vec<String> = runs
        .rows
        .iter()
        .zip(&normalised)
        .filter(|(_, v)| !in_band(**v))
        .map(|(row, v)| format!("{} {} × {} ({v:.2})", row.label, row.size, row.nodes))
        .collect();
    let (low, high) = normalised
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let _ = writeln!(
        out,
        "Wasm time per gas, normalised to the median: {low:.2} to {high:.2}. Outside [0.5, 2]: \
         {}.\n",
        if outside.is_empty() {
            "none".to_string()
        } else {
            format!(
                "{} of {}: {}",
                outside.len(),
                runs.rows.len(),
                outside.join(", ")
            )
        }
    );
    let _ = writeln!(
        out,
        "| model | size | nodes | inputs | outputs | new arena | gas | run gas | samples | run (ms) | \
         wasm/gas |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (row, v) in runs.rows.iter().zip(&normalised) {
        let mark = if in_band(*v) { "" } else { "!" };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.3} | {v:.2}{mark} |",
            row.label,
            row.size,
            row.nodes,
            row.elements[0],
            row.elements[1],
            row.elements[2],
            row.gas,
            row.run_gas,
            row.samples,
            runs.ns(row) / 1e6,
        );
    }
    super::not_measured(&mut out, &runs.failures);
    out
}

/// Measures the runs and writes the generated file.
///
/// # Errors
/// As [`measure_all`], a file that cannot be written, and, after the file, any case that failed.
pub fn run(options: &Options) -> Result<(), String> {
    let runs = measure_all(options)?;
    super::write_generated(options, &markdown(options, &runs), &runs.failures)
}
