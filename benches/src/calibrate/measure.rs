//! Measuring a model: the wasm fuel of a run in a fresh instance, and the median wall time of
//! repeated runs in wasm and natively; and isolating one node's cost by difference (see
//! [`node_cost`]).

use std::hint::black_box;
use std::time::{Duration, Instant};

use cvm_cli::runner::encode_inputs;
use cvm_engine::exec::InputTensor;
use cvm_engine::model::{Model, Node};
use cvm_engine::{Report, ValidatedModel};
use cvm_runtime::wasm::{WasmEngine, WasmSession};

use super::SCHEDULE;
use super::stats::median;

/// How long to sample one engine's wall time for one model.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Sampling stops after this much time (once `min_samples` are taken).
    pub budget: Duration,
    /// At least this many samples.
    pub min_samples: usize,
    /// At most this many samples.
    pub max_samples: usize,
    /// A sample runs the model enough times in a row to last at least this long, so that short
    /// runs are not lost in the clock's resolution.
    pub min_sample: Duration,
    /// Most fuel the model with the copies may burn per run (bounds the copies).
    pub copies_fuel: u64,
}

/// Most copies of the node added to the differential model.
pub const MAX_COPIES: u64 = 32;

/// The costs of one run of one model.
#[derive(Clone, Debug, PartialEq)]
pub struct RunCost {
    /// Fuel of the first run in a fresh instance: exactly reproducible.
    pub fuel: u64,
    /// Median fuel of warm runs (the second run and the last of every wall-time sample).
    pub fuel_warm: u64,
    /// Largest less smallest fuel of those warm runs: the allocator's free lists and its
    /// periodic bookkeeping differ between runs of one instance.
    pub fuel_jitter: u64,
    /// Median wall time of a wasm run (`WasmSession::run`: request, run, reply), ns.
    pub wasm_ns: f64,
    /// Median wall time of a native run (`cvm_engine::run`), ns.
    pub native_ns: f64,
    /// Samples behind the medians (wasm, native).
    pub samples: (usize, usize),
    /// Runs per sample (wasm, native).
    pub batch: (u64, u64),
}

/// The cost of the node alone, by difference, and what it rests on.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeCost {
    /// Copies of the node in the differential model (the node plus `copies` more).
    pub copies: u64,
    /// The single-node model.
    pub single: RunCost,
    /// The model with the copies.
    pub multi: RunCost,
    /// Fuel of the node: (multi − single) / copies.
    pub fuel: f64,
    /// Wall time of the node in wasm, ns.
    pub wasm_ns: f64,
    /// Wall time of the node natively, ns.
    pub native_ns: f64,
}

/// `model` (one node, whose outputs are the model's) with `copies` more copies of its node:
/// same operands and attributes, outputs unused, so each is dead right after it runs and the
/// copies take turns in the same arena elements.
pub fn with_copies(model: &Model, copies: u64) -> Model {
    let mut model = model.clone();
    if let Some(node) = model.nodes.first().cloned() {
        model.nodes.extend((1..=copies).map(|i| Node {
            name: format!("copy{i}"),
            ..node.clone()
        }));
    }
    model
}

fn failure(report: &Report) -> Option<String> {
    report.error_code().map(|code| {
        format!(
            "run fails with {code:?}: {}",
            report
                .failure
                .as_ref()
                .map_or(String::new(), |f| f.message.clone())
        )
    })
}

fn wasm_error(error: cvm_runtime::NodeError) -> String {
    error.to_string()
}

/// A fresh instance with `bytes` loaded.
fn session(engine: &WasmEngine, bytes: &[u8]) -> Result<WasmSession, String> {
    let mut session = engine.session().map_err(wasm_error)?;
    if let Some(report) = session.load(bytes, SCHEDULE.version).map_err(wasm_error)? {
        return Err(failure(&report).unwrap_or_else(|| "engine.wasm rejects the model".into()));
    }
    Ok(session)
}

/// Fuel of one run of `bytes` on `encoded` inputs in a fresh instance.
///
/// # Errors
/// If the model fails or the wasm runtime does.
pub fn cold_fuel(engine: &WasmEngine, bytes: &[u8], encoded: &[u8]) -> Result<u64, String> {
    let mut session = session(engine, bytes)?;
    let report = session.run(encoded, u64::MAX).map_err(wasm_error)?;
    if let Some(message) = failure(&report) {
        return Err(message);
    }
    session.fuel_used().map_err(wasm_error)
}

/// Runs per sample for a run of `once`: enough to last `timing.min_sample`.
fn batch_for(once: Duration, timing: &Timing) -> u64 {
    let once = once.as_nanos().max(1);
    (timing.min_sample.as_nanos().div_ceil(once) as u64).clamp(1, 10_000)
}

/// One model ready to run in both engines, its outcome checked.
struct Subject<'a> {
    validated: ValidatedModel,
    session: WasmSession,
    inputs: &'a [InputTensor],
    encoded: Vec<u8>,
    /// Fuel of the first run of the fresh instance.
    fuel: u64,
    /// Fuel of the warm runs.
    fuels: Vec<u64>,
    /// Runs per sample (wasm, native).
    batch: (u64, u64),
}

impl<'a> Subject<'a> {
    /// Validates `model`, runs it natively and twice in a fresh wasm instance (the first run's
    /// fuel is kept), and checks that both engines succeed with the same outcome.
    fn new(
        engine: &WasmEngine,
        model: &Model,
        inputs: &'a [InputTensor],
        timing: &Timing,
    ) -> Result<Subject<'a>, String> {
        let bytes = model.encode();
        let validated = ValidatedModel::from_bytes(&bytes, SCHEDULE).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let native = cvm_engine::run(&validated, inputs.to_vec(), u64::MAX);
        let native_once = started.elapsed();
        if let Some(message) = failure(&native) {
            return Err(message);
        }
        let mut session = session(engine, &bytes)?;
        let encoded = encode_inputs(inputs);
        let cold = session.run(&encoded, u64::MAX).map_err(wasm_error)?;
        let fuel = session.fuel_used().map_err(wasm_error)?;
        if cold.outcome != native.outcome {
            return Err("engine.wasm and the native engine disagree".into());
        }
        let started = Instant::now();
        black_box(session.run(&encoded, u64::MAX).map_err(wasm_error)?);
        let wasm_once = started.elapsed();
        let fuels = vec![session.fuel_used().map_err(wasm_error)?];
        Ok(Subject {
            validated,
            session,
            inputs,
            encoded,
            fuel,
            fuels,
            batch: (batch_for(wasm_once, timing), batch_for(native_once, timing)),
        })
    }

    /// Wall time of one wasm run, averaged over a sample.
    fn wasm(&mut self) -> Result<f64, String> {
        let batch = self.batch.0;
        let started = Instant::now();
        for _ in 0..batch {
            black_box(
                self.session
                    .run(&self.encoded, u64::MAX)
                    .map_err(wasm_error)?,
            );
        }
        let elapsed = started.elapsed();
        self.fuels
            .push(self.session.fuel_used().map_err(wasm_error)?);
        Ok(elapsed.as_nanos() as f64 / batch as f64)
    }

    /// Wall time of one native run (inputs copied beforehand), averaged over a sample.
    fn native(&mut self) -> f64 {
        let batch = self.batch.1;
        let copies: Vec<Vec<InputTensor>> = (0..batch).map(|_| self.inputs.to_vec()).collect();
        let started = Instant::now();
        for copy in copies {
            black_box(cvm_engine::run(&self.validated, copy, u64::MAX));
        }
        started.elapsed().as_nanos() as f64 / batch as f64
    }

    fn cost(&mut self, wasm: &mut [f64], native: &mut [f64]) -> RunCost {
        self.fuels.sort_unstable();
        RunCost {
            fuel: self.fuel,
            fuel_warm: self.fuels[self.fuels.len() / 2],
            fuel_jitter: self.fuels[self.fuels.len() - 1] - self.fuels[0],
            wasm_ns: median(wasm),
            native_ns: median(native),
            samples: (wasm.len(), native.len()),
            batch: self.batch,
        }
    }
}

/// Wall-time samples of the two models, and their per-pair differences.
struct Paired {
    single: Vec<f64>,
    multi: Vec<f64>,
    difference: Vec<f64>,
}

/// Alternates samples of `single` and `multi` until the budget is spent. Pairing cancels drift
/// in the machine's speed.
fn paired(
    timing: &Timing,
    mut single: impl FnMut() -> Result<f64, String>,
    mut multi: impl FnMut() -> Result<f64, String>,
) -> Result<Paired, String> {
    let started = Instant::now();
    let mut series = Paired {
        single: Vec::new(),
        multi: Vec::new(),
        difference: Vec::new(),
    };
    while series.single.len() < timing.max_samples
        && (series.single.len() < timing.min_samples || started.elapsed() < timing.budget)
    {
        let (x, y) = (single()?, multi()?);
        series.single.push(x);
        series.multi.push(y);
        series.difference.push(y - x);
    }
    Ok(series)
}

/// The cost of the single node of `model` by difference: the model is measured as it is and
/// with `copies` more copies of its node, and the node costs (multi − single) / copies in fuel
/// (of a fresh instance's first run, exactly reproducible) and in both wall times (the median
/// over alternating samples of the two models of their difference). Everything else a run does
/// (decoding and checking the inputs, encoding the report, crossing the wasm boundary) is the
/// same in both and cancels.
///
/// The copies are chosen so that their work outweighs that fixed overhead about three times, at
/// most [`MAX_COPIES`], and within `timing.copies_fuel` per run; a first pair of fresh-instance
/// runs (one copy) gives the estimate. Both models must succeed, natively and in wasm, with the
/// same outcome.
///
/// # Errors
/// If a model does not validate or fails, the engines disagree, or the wasm runtime fails.
pub fn node_cost(
    engine: &WasmEngine,
    model: &Model,
    inputs: &[InputTensor],
    timing: &Timing,
) -> Result<NodeCost, String> {
    let encoded = encode_inputs(inputs);
    let single_fuel = cold_fuel(engine, &model.encode(), &encoded)?;
    let pair_fuel = cold_fuel(engine, &with_copies(model, 1).encode(), &encoded)?;
    let node = pair_fuel.saturating_sub(single_fuel).max(1);
    let overhead = single_fuel.saturating_sub(node);
    let wanted = (3 * overhead).div_ceil(node).clamp(1, MAX_COPIES);
    let affordable = (timing.copies_fuel.saturating_sub(single_fuel) / node).max(1);
    let copies = wanted.min(affordable);

    let mut single = Subject::new(engine, model, inputs, timing)?;
    let mut multi = Subject::new(engine, &with_copies(model, copies), inputs, timing)?;
    let mut wasm = paired(timing, || single.wasm(), || multi.wasm())?;
    let mut native = paired(timing, || Ok(single.native()), || Ok(multi.native()))?;
    let single_cost = single.cost(&mut wasm.single, &mut native.single);
    let multi_cost = multi.cost(&mut wasm.multi, &mut native.multi);
    let per_copy = copies as f64;
    Ok(NodeCost {
        copies,
        fuel: (multi_cost.fuel as f64 - single_cost.fuel as f64) / per_copy,
        wasm_ns: median(&mut wasm.difference) / per_copy,
        native_ns: median(&mut native.difference) / per_copy,
        single: single_cost,
        multi: multi_cost,
    })
}
