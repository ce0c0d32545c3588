//! The CVM engine for a node to link: `engine.wasm` (built from `cvm-engine` and embedded at
//! build time) inside the one locked wasmtime configuration, the compiled-module cache, loaded
//! models, runs and outcome hashes.
//!
//! ```no_run
//! use cvm_runtime::{InputTensor, LoadError, Runtime, RuntimeConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let (model_bytes, schedule_version, gas_limit) = (Vec::<u8>::new(), 1, 1 << 32);
//! let runtime = Runtime::new(&RuntimeConfig::compile_in_process())?; // once per process
//! let model = match runtime.load(&model_bytes, schedule_version) {
//!     Ok(model) => model,
//!     Err(LoadError::Rejected(verdict)) => {
//!         // A deterministic rejection: every node reaches it; vote with its hash.
//!         println!("{}", cvm_runtime::hash::hex(&verdict.hash()));
//!         return Ok(());
//!     }
//!     Err(LoadError::Node(error)) => return Err(error.into()), // this node failed: no vote
//! };
//! let inputs = vec![InputTensor { shape: vec![1, 4], data: vec![1, 2, 3, 4] }];
//! let verdict = model.run(&inputs, gas_limit)?; // from any number of threads at once
//! println!("gas {} hash {}", verdict.outcome().gas_used, cvm_runtime::hash::hex(&verdict.hash()));
//! # Ok(()) }
//! ```
//!
//! Two kinds of result, never mixed: a [`Verdict`] is deterministic (the same on every node, and
//! hashed for consensus), a [`NodeError`] is a failure of this node (never hashed). Nothing here
//! picks a consensus parameter on the caller's behalf: the gas schedule version of a load and the
//! gas limit of a run are always the caller's.
//!
//! [`native::NativeModel`] runs the same engine compiled for this machine, with the same
//! verdicts, to compare the two builds. [`wasm`] is the layer below (one engine instance, one session at a time), for the `cvm` tool
//! and the tests and benchmarks that time or meter single calls.

pub mod batch;
pub mod error;
pub mod generate;
pub mod hash;
pub mod native;
pub mod trace;
pub mod wasm;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

pub use cvm_engine::exec::InputTensor;
pub use cvm_engine::outcome::OutputTensor;
pub use cvm_engine::{ErrorCode, Outcome, Report, Status};
pub use error::NodeError;

use crate::hash::HashAlgorithm;
use crate::wasm::{WasmEngine, WasmSession};

/// How a [`Runtime`] gets its compiled engine module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Where the compiled `engine.wasm` is kept between processes (see "The compiled-module
    /// cache" in `docs/host.md`); `None` compiles it in the process and writes nothing.
    pub cache_dir: Option<PathBuf>,
}

impl RuntimeConfig {
    /// Compile `engine.wasm` in the process (about 2 s with Cranelift), no files written.
    pub fn compile_in_process() -> RuntimeConfig {
        RuntimeConfig { cache_dir: None }
    }

    /// Keep the compiled module in `dir`: only the first start on a machine compiles.
    pub fn with_cache_dir(dir: impl Into<PathBuf>) -> RuntimeConfig {
        RuntimeConfig {
            cache_dir: Some(dir.into()),
        }
    }
}

/// The compiled engine: create one per process and share it (it is `Send + Sync`; clones share
/// the compiled module).
#[derive(Clone)]
pub struct Runtime {
    engine: Arc<WasmEngine>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("origin", &self.engine.origin())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Compiles `engine.wasm`, or loads it from the module cache of `config`.
    ///
    /// # Errors
    /// [`NodeError::Wasm`] when wasmtime rejects the configuration or the module; never because
    /// of the cache (its problems fall back to compiling, see [`Runtime::cache_problems`]).
    pub fn new(config: &RuntimeConfig) -> Result<Runtime, NodeError> {
        let engine = match &config.cache_dir {
            Some(dir) => WasmEngine::with_cache(dir)?,
            None => WasmEngine::new()?,
        };
        Ok(Runtime {
            engine: Arc::new(engine),
        })
    }

    /// Cache problems met by [`Runtime::new`], each already handled by compiling.
    pub fn cache_problems(&self) -> &[String] {
        self.engine.cache_problems()
    }

    /// Loads canonical model bytes (`docs/model-format.md`) priced under gas schedule
    /// `schedule_version`: the engine decodes and validates them once, here; runs reuse the
    /// result. A validator replaying a block passes the version the block was charged under.
    ///
    /// # Errors
    /// [`LoadError::Rejected`] with the deterministic rejection (gas 0; `UnsupportedVersion` when
    /// the engine defines no such schedule), [`LoadError::Node`] when this node's wasm runtime
    /// fails.
    pub fn load(&self, model_bytes: &[u8], schedule_version: u32) -> Result<Model, LoadError> {
        let mut session = self.engine.session()?;
        if let Some(report) = session.load(model_bytes, schedule_version)? {
            return Err(LoadError::Rejected(Box::new(Verdict::new(report))));
        }
        Ok(Model {
            engine: Arc::clone(&self.engine),
            bytes: model_bytes.into(),
            schedule_version,
            idle: Mutex::new(vec![session]),
        })
    }
}

/// Why [`Runtime::load`] gave no model.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The engine rejected the model: a deterministic outcome, hashed like any other.
    #[error("model rejected: {}", .0.message())]
    Rejected(Box<Verdict>),
    /// This node failed; the model was not judged.
    #[error(transparent)]
    Node(#[from] NodeError),
}

/// A model loaded under one gas schedule, ready for any number of runs from any number of
/// threads (it is `Send + Sync`).
///
/// Each run has an engine instance of its own (its own wasmtime store and linear memory), taken
/// from a pool of instances that have this model decoded and validated already; a run that finds
/// none idle instantiates one and loads the model into it once. An instance keeps between runs
/// only the validated model and its allocator's free memory: the run's inputs, arena and reply
/// are written afresh by every run, and fuel is granted afresh to every call, so a run's outcome
/// does not depend on which instance served it or what it served before. An instance whose run
/// failed on this node (a trap, fuel or memory exhaustion) is dropped, never reused.
pub struct Model {
    engine: Arc<WasmEngine>,
    bytes: Box<[u8]>,
    schedule_version: u32,
    idle: Mutex<Vec<WasmSession>>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("bytes", &self.bytes.len())
            .field("schedule_version", &self.schedule_version)
            .finish_non_exhaustive()
    }
}

impl Model {
    /// The gas schedule version the model was loaded under.
    pub fn schedule_version(&self) -> u32 {
        self.schedule_version
    }

    /// Runs the model on `inputs` (one tensor per declared input, in order) with at most
    /// `gas_limit` gas. Wrong inputs and running out of gas are deterministic outcomes, not
    /// errors.
    ///
    /// # Errors
    /// [`NodeError`] when this node's wasm runtime fails (never for the model's own errors).
    pub fn run(&self, inputs: &[InputTensor], gas_limit: u64) -> Result<Verdict, NodeError> {
        let mut session = match self.take_idle() {
            Some(session) => session,
            None => self.fresh_session()?,
        };
        let report = session.run_inputs(inputs, gas_limit)?;
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(session);
        Ok(Verdict::new(report))
    }

    /// Runs the model as [`Model::run`] does, with a trace of the run ([`trace`]): every node's
    /// output hashes and gas so far, their Merkle root, and the values when `options` keeps
    /// them. The verdict is the untraced run's; the trace is never part of it.
    ///
    /// # Errors
    /// [`NodeError`] when this node's wasm runtime fails, or when the model's bytes no longer
    /// decode on the host (an engine bug: they loaded).
    pub fn trace(
        &self,
        inputs: &[InputTensor],
        gas_limit: u64,
        options: trace::TraceOptions,
    ) -> Result<(Verdict, trace::Trace), NodeError> {
        let traced = trace::TraceModel::from_bytes(&self.bytes).map_err(|error| {
            NodeError::Wasm(format!("the loaded model does not decode: {error}"))
        })?;
        let mut session = match self.take_idle() {
            Some(session) => session,
            None => self.fresh_session()?,
        };
        let (report, trace) = trace::trace_wasm(
            &mut session,
            self.schedule_version,
            &traced,
            inputs,
            gas_limit,
            options,
        )?;
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(session);
        Ok((Verdict::new(report), trace))
    }

    fn take_idle(&self) -> Option<WasmSession> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    /// A new engine instance with this model loaded.
    fn fresh_session(&self) -> Result<WasmSession, NodeError> {
        let mut session = self.engine.session()?;
        match session.load(&self.bytes, self.schedule_version)? {
            None => Ok(session),
            // The same bytes loaded under the same schedule when the model was created: only an
            // engine bug or a broken machine gets here.
            Some(report) => Err(NodeError::Wasm(format!(
                "a model that loaded once was rejected on a new instance: {}",
                Verdict::new(report).message()
            ))),
        }
    }
}

/// The deterministic result of a load or run: its outcome (the outputs, or the error code and
/// failing node; the gas used), with the outcome's hash and the engine's message for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    report: Report,
    hash: [u8; 32],
}

impl Verdict {
    fn new(report: Report) -> Verdict {
        let hash = hash::outcome_hash(&report, HashAlgorithm::Sha3_256);
        Verdict { report, hash }
    }

    /// The rejection of a model by a check made before the engine saw it (a reader's, such as
    /// the CVM load checks of `cvm-formats`): gas 0, hashed like the engine's own rejections.
    pub fn rejected(error: cvm_engine::Error) -> Verdict {
        Verdict::new(Report::failure(error, 0))
    }

    /// The verdict of a report made outside this crate's engines (a reader's rejection of a
    /// CVM model, as `cvm_formats::model::load_model` gives it): hashed as any other.
    pub fn of_report(report: Report) -> Verdict {
        Verdict::new(report)
    }

    /// What every node must agree on.
    pub fn outcome(&self) -> &Outcome {
        &self.report.outcome
    }

    /// SHA3-256 of the outcome's canonical bytes: equal on two nodes iff their outcomes are.
    pub fn hash(&self) -> [u8; 32] {
        self.hash
    }

    /// The outcome's hash under another algorithm (Keccak-256 for Ethereum-family chains).
    pub fn hash_with(&self, algorithm: HashAlgorithm) -> [u8; 32] {
        hash::outcome_hash(&self.report, algorithm)
    }

    /// The output tensors of a successful run, in declared order; `None` on failure.
    pub fn outputs(&self) -> Option<&[OutputTensor]> {
        match &self.report.outcome.status {
            Status::Ok { outputs } => Some(outputs),
            Status::Error { .. } => None,
        }
    }

    /// The error code of a failed load or run; `None` on success.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.report.error_code()
    }

    /// The whole report: outcome plus output names and the failure's message (not hashed).
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The failure's message ("ok" on success), for logs; never hashed.
    pub fn message(&self) -> &str {
        self.report
            .failure
            .as_ref()
            .map_or("ok", |failure| failure.message.as_str())
    }
}
