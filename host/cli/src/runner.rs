//! Running a model natively or in wasm behind one interface, and loading models from files.
//!
//! Both paths feed the same canonical model bytes, the same gas schedule version and the same
//! borsh-encoded inputs to the same engine code (`cvm_engine::load` +
//! `run_encoded`); the wasm path does it inside wasmtime (`cvm_load`).

use std::time::{Duration, Instant};

use cvm_engine::exec::InputTensor;
use cvm_engine::{Report, ValidatedModel};

use crate::error::HostError;
pub use cvm_formats::model::{LoadedModel, ModelSource, load_model, load_model_file};
use cvm_runtime::wasm::{WasmEngine, WasmSession};

/// Which engine build executes the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// `engine.wasm` inside wasmtime (the consensus configuration).
    #[default]
    Wasm,
    /// The same engine compiled for this machine.
    Native,
}

impl EngineKind {
    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Wasm => "wasm",
            EngineKind::Native => "native",
        }
    }
}

/// Encodes inputs the way the ABI takes them.
pub fn encode_inputs(inputs: &[InputTensor]) -> Vec<u8> {
    if let Some(len) = cvm_engine::exec::encoded_inputs_len(inputs) {
        let mut bytes = vec![0; len];
        if cvm_engine::exec::encode_inputs_into(inputs, &mut bytes) {
            return bytes;
        }
    }
    borsh::to_vec(inputs).unwrap_or_default()
}

/// Loads `model` under gas schedule `schedule` and runs it on `inputs` with `engine`; a load
/// failure (an undefined schedule version among them: `UnsupportedVersion`) is returned as the
/// (deterministic) failure report. Without `wasm`, the wasm path compiles `engine.wasm` first.
///
/// # Errors
/// [`HostError::Wasm`] for failures of the wasm runtime (never for the model's own errors).
pub fn execute(
    engine: EngineKind,
    wasm: Option<&WasmEngine>,
    model: &[u8],
    inputs: &[InputTensor],
    gas_limit: u64,
    schedule: u32,
) -> Result<Report, HostError> {
    execute_timed(
        engine,
        wasm,
        model.to_vec(),
        inputs.to_vec(),
        gas_limit,
        schedule,
        &mut Timings::default(),
    )
}

/// [`execute`], taking the model's bytes and the inputs so that each is freed as soon as the
/// engine holds its own copy (what `cvm run` does, so that its peak memory is the engine's), and
/// recording the duration of each phase in `timings`: natively `model load` (decode +
/// validate) and `run`; in wasm `engine compile` (only without `wasm`), `instantiate`,
/// `model load`, `input encoding` (written straight into the engine's memory), `run` and
/// `report decoding` (read where it lies in the engine's memory).
///
/// # Errors
/// As [`execute`].
pub fn execute_timed(
    engine: EngineKind,
    wasm: Option<&WasmEngine>,
    model: Vec<u8>,
    inputs: Vec<InputTensor>,
    gas_limit: u64,
    schedule: u32,
    timings: &mut Timings,
) -> Result<Report, HostError> {
    let owned;
    let wasm = match (engine, wasm) {
        (EngineKind::Wasm, None) => {
            owned = timings.time(phase::ENGINE_COMPILE, WasmEngine::new)?;
            Some(&owned)
        }
        (_, wasm) => wasm,
    };
    let mut session = match Session::load(engine, wasm, model, schedule, timings)? {
        Ok(session) => session,
        Err(report) => return Ok(*report),
    };
    let report = session.run(inputs, gas_limit, timings)?;
    timings.record_memory(session.planned_bytes(), session.engine_bytes());
    Ok(report)
}

/// A model loaded once on one engine, for any number of runs: the validated model natively, an
/// engine instance holding it in wasm. Each run writes its inputs, arena and reply afresh and
/// gets its fuel afresh (`cvm_runtime::Model` reuses its instances the same way), so a run's
/// outcome does not depend on the runs before it. `cvm run --batch` runs every sample through
/// one.
pub enum Session {
    /// The engine compiled for this machine, with the validated model.
    Native(Box<ValidatedModel>),
    /// An instance of `engine.wasm` with the model loaded.
    Wasm(Box<WasmSession>),
}

impl Session {
    /// Loads `model` under gas schedule `schedule` on `engine` (in wasm, a new instance of
    /// `wasm`), recording `instantiate` (wasm) and `model load` in `timings`. The model's bytes
    /// are freed once the engine holds its own copy. `Ok(Err(report))` is the engine's
    /// deterministic rejection of the model.
    ///
    /// # Errors
    /// [`HostError::Wasm`] when the wasm runtime fails, or when `engine` is wasm and `wasm` is
    /// `None`.
    pub fn load(
        engine: EngineKind,
        wasm: Option<&WasmEngine>,
        model: Vec<u8>,
        schedule: u32,
        timings: &mut Timings,
    ) -> Result<Result<Session, Box<Report>>, HostError> {
        match engine {
            EngineKind::Native => {
                let validated =
                    timings.time(phase::MODEL_LOAD, || cvm_engine::load(&model, schedule));
                drop(model);
                Ok(validated.map(|validated| Session::Native(Box::new(validated))))
            }
            EngineKind::Wasm => {
                let wasm = wasm.ok_or_else(|| {
                    HostError::Wasm("a wasm session needs the compiled engine".into())
                })?;
                let mut session = timings.time(phase::INSTANTIATE, || wasm.session())?;
                let rejected =
                    timings.time(phase::MODEL_LOAD, || session.load(&model, schedule))?;
                drop(model);
                Ok(match rejected {
                    Some(report) => Err(Box::new(report)),
                    None => Ok(Session::Wasm(Box::new(session))),
                })
            }
        }
    }

    /// Runs the loaded model on `inputs` with at most `gas_limit` gas, adding to `timings`
    /// natively `run`, in wasm `input encoding`, `run` and `report decoding`. The inputs are
    /// freed once the engine holds them.
    ///
    /// # Errors
    /// [`HostError::Wasm`] for failures of the wasm runtime (never for the model's own errors);
    /// the instance should not be run again after one.
    pub fn run(
        &mut self,
        inputs: Vec<InputTensor>,
        gas_limit: u64,
        timings: &mut Timings,
    ) -> Result<Report, HostError> {
        match self {
            Session::Native(validated) => {
                Ok(timings.time(phase::RUN, || cvm_engine::run(validated, inputs, gas_limit)))
            }
            Session::Wasm(session) => {
                let request =
                    timings.time(phase::INPUT_ENCODING, || session.put_inputs(&inputs))?;
                drop(inputs);
                timings.time(phase::RUN, || session.run_request(request, gas_limit))?;
                Ok(timings.time(phase::REPORT_DECODING, || session.report())?)
            }
        }
    }

    /// The loaded model's planned peak of tensor memory, in bytes.
    pub fn planned_bytes(&self) -> u64 {
        match self {
            Session::Native(validated) => validated.peak_memory_bytes,
            Session::Wasm(session) => session.planned_bytes(),
        }
    }

    /// The wasm engine's linear memory, in bytes; `None` natively.
    pub fn engine_bytes(&self) -> Option<usize> {
        match self {
            Session::Native(_) => None,
            Session::Wasm(session) => Some(session.memory_bytes()),
        }
    }
}

/// Names of the phases [`Timings`] records.
pub mod phase {
    /// Reading the model's files and converting them to canonical bytes.
    pub const READ_MODEL: &str = "read model";
    /// Reading the input files.
    pub const READ_INPUTS: &str = "read inputs";
    /// Cranelift compilation of `engine.wasm`.
    pub const ENGINE_COMPILE: &str = "engine compile";
    /// Loading the compiled module from the module cache.
    pub const ENGINE_CACHE_LOAD: &str = "engine cache load";
    /// Instantiating `engine.wasm` (memory, exports, ABI check).
    pub const INSTANTIATE: &str = "instantiate";
    /// Decoding and validating the model in the engine.
    pub const MODEL_LOAD: &str = "model load";
    /// Writing the inputs into the engine's memory as its request (wasm only).
    pub const INPUT_ENCODING: &str = "input encoding";
    /// The run (in wasm: up to the reply's bytes).
    pub const RUN: &str = "run";
    /// Decoding the engine's reply into a report (wasm only).
    pub const REPORT_DECODING: &str = "report decoding";
    /// Hashing the outcome.
    pub const HASHING: &str = "hashing";
}

/// Wall-clock durations of the phases of one command, in the order they first ran (`cvm run
/// --timings`; with `--batch`, each run phase summed over the samples). Timings are node-local:
/// they are never part of an outcome or a hash.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    phases: Vec<(&'static str, Duration)>,
    /// The loaded model's planned peak of tensor memory, in bytes.
    planned_bytes: Option<u64>,
    /// The wasm engine's linear memory after the run, in bytes.
    engine_bytes: Option<usize>,
}

impl Timings {
    /// Runs `work`, recording its duration under `phase`.
    pub fn time<T>(&mut self, phase: &'static str, work: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let result = work();
        self.record(phase, started.elapsed());
        result
    }

    /// Records `duration` under `phase`. A phase recorded again (the runs of `cvm run
    /// --batch`) keeps its first place and adds up its durations.
    pub fn record(&mut self, phase: &'static str, duration: Duration) {
        match self.phases.iter_mut().find(|(name, _)| *name == phase) {
            Some((_, total)) => *total = total.saturating_add(duration),
            None => self.phases.push((phase, duration)),
        }
    }

    /// The phases recorded, in order.
    pub fn phases(&self) -> &[(&'static str, Duration)] {
        &self.phases
    }

    /// Records the loaded model's planned peak of tensor memory and, in wasm, the size of the
    /// engine's linear memory after the run.
    pub fn record_memory(&mut self, planned_bytes: u64, engine_bytes: Option<usize>) {
        self.planned_bytes = Some(planned_bytes);
        self.engine_bytes = engine_bytes;
    }

    /// One line per phase, `timing: <phase> <milliseconds> ms` with three decimals, then the
    /// sum of the phases; then what is known of memory: `memory: planned peak <N> bytes` (the
    /// model's plan, as `cvm estimate` prints it), `memory: engine <N> bytes` (the wasm engine's
    /// linear memory after the run) and `memory: peak resident <N> KiB` (the process's high-water
    /// mark of resident memory so far, where the system reports it: Linux's `VmHWM`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (phase, duration) in &self.phases {
            out.push_str(&format!(
                "timing: {phase:<18} {:>12} ms\n",
                millis(*duration)
            ));
        }
        let total: Duration = self.phases.iter().map(|(_, duration)| *duration).sum();
        out.push_str(&format!(
            "timing: {:<18} {:>12} ms\n",
            "total",
            millis(total)
        ));
        if let Some(planned) = self.planned_bytes {
            out.push_str(&format!("memory: planned peak {planned} bytes\n"));
        }
        if let Some(engine) = self.engine_bytes {
            out.push_str(&format!("memory: engine {engine} bytes\n"));
        }
        if let Some(resident) = peak_resident_kib() {
            out.push_str(&format!("memory: peak resident {resident} KiB\n"));
        }
        out
    }
}

/// The process's high-water mark of resident memory in KiB (`VmHWM` of `/proc/self/status`);
/// `None` where the system does not report it.
pub fn peak_resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line["VmHWM:".len()..]
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// `duration` in milliseconds with three decimals (integer arithmetic).
pub fn millis(duration: Duration) -> String {
    let micros = duration.as_micros();
    format!("{}.{:03}", micros / 1000, micros % 1000)
}

/// Decodes and validates natively under gas schedule `schedule`, for `estimate`, `inspect`,
/// `build` and `import`.
///
/// # Errors
/// The engine's deterministic rejection, as a report (`UnsupportedVersion` for an undefined
/// schedule version).
pub fn validate_natively(bytes: &[u8], schedule: u32) -> Result<ValidatedModel, Box<Report>> {
    cvm_engine::load(bytes, schedule)
}
